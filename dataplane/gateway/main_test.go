package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: the
// gateway's tests start engines, a pool and an HTTP server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// cloudwego/netpoll starts its pollers with the first connection
		// and keeps them for the life of the process.
		goleak.IgnoreAnyFunction("github.com/cloudwego/netpoll.(*defaultPoll).Wait"),
		// gnet's default goroutine pool is an ants pool made when gnet's
		// package initialises; its housekeeping goroutines live for the
		// life of the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
	)
}
