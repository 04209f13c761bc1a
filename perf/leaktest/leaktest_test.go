package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestOptionsSeeALeak: the ignores are the libraries' goroutines only; a
// goroutine of the test's own is still found, and not once it ends.
func TestOptionsSeeALeak(t *testing.T) {
	release, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-release
	}()
	if err := goleak.Find(Options()...); err == nil {
		t.Fatal("a blocked goroutine of the test's own was not found")
	}
	close(release)
	<-done
	if err := goleak.Find(Options()...); err != nil {
		t.Fatalf("no goroutine is left, yet: %v", err)
	}
}

func TestMain(m *testing.M) { Main(m) }
