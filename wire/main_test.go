package wire

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: the
// handshake tests' servers and the writer tests' senders must all end.
// Nothing is ignored: the package uses no library that keeps goroutines
// for the life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
