package llamacpp

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// modelDir holds the random-weight model the real-server tests share
// (written once: 80 MB), removed when the tests end.
var modelDir string

// TestMain fails the run if a test leaves a goroutine behind: the relays,
// the poll loop, the bridge's server and the HTTP clients' connections
// must all end when their owner closes.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvgate-llamacpp-")
	if err != nil {
		panic(err)
	}
	modelDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
