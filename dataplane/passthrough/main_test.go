package passthrough

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a pool's
// poller must end with Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet (through httpx) makes its default ants pool when its
		// package initialises; the pool's two housekeeping goroutines live
		// for the life of the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}
