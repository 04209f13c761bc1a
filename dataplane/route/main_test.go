package route

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test or benchmark leaves a goroutine behind
// (the parallel routing benchmarks' workers, the engine pools they dial).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// cloudwego/netpoll starts its pollers with the first connection
		// and keeps them for the life of the process.
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
	)
}
