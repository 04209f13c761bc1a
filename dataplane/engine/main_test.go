package engine

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: an engine's
// connection loop, reader and keep-alive must all end with Pool.Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// cloudwego/netpoll starts its pollers with the first connection
		// and keeps them for the life of the process.
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
	)
}
