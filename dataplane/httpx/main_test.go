package httpx

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a server's
// event loops and handlers must all end with Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's default goroutine pool is an ants pool made when gnet's
		// package initialises; its two housekeeping goroutines live for
		// the life of the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}
