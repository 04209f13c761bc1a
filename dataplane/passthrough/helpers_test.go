package passthrough

import (
	"testing"
	"time"
)

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed: the package's one way to
// wait for what the pool's poller does. Tests wait for a condition, they
// never time one, so timeouts are generous (CI is a loaded 2-core
// machine).
func checkFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(interval) // the poll interval
	}
}
