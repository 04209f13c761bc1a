package vllm_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the
// subscriber, the engine's HTTP streams, the bridge's server and the fake
// vLLM's sockets must all end when their owner closes.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// zmq4 v0.17.0 starts one writer goroutine per PUB socket and its
		// Close never stops it (socket.Close does not close the writer,
		// and nothing outside zmq4 can): the fake vLLM's PUB socket
		// leaves one behind for the rest of the process. kvgate-bridge
		// opens SUB sockets only.
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
	)
}
