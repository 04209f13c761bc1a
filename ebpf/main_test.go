package ebpf

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: a sockmap
// steerer's dispatcher must end with Close, and the tests' upstreams and
// proxies with their listeners. Nothing is ignored: cilium/ebpf starts no
// goroutines of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
