package kvstore

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (the
// concurrency tests' readers and writers). Nothing is ignored: the
// package uses no library that keeps goroutines for the life of the
// process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
