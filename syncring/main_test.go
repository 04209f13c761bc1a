package syncring

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a ring's
// loop, links and resolver, and the test proxy's relays, must all end
// when their owner closes. Nothing is ignored: the package uses no
// library that keeps goroutines for the life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
