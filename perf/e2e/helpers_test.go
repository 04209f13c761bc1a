//go:build e2e

package e2e

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	kvebpf "github.com/kvgate/kvgate/ebpf"
)

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed: the package's one way to
// wait for what the processes under test do. Tests wait for a condition,
// they never time one, so timeouts are generous (CI is a loaded 2-core
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

// requireRoot skips t unless it runs as root: kvgate's sockmap steering
// loads eBPF programs and socket maps, which takes CAP_BPF and
// CAP_NET_ADMIN. CI and the project's machines run as root, where these
// tests must run, not skip.
func requireRoot(t testing.TB) {
	t.Helper()
	if uid := os.Geteuid(); uid != 0 {
		t.Skipf("needs root for sockmap steering (running as uid %d)", uid)
	}
}

// requireSockmap skips t unless kvgate can steer with sockmap here: as
// root (requireRoot), on a kernel with what ebpf.SockmapSupported probes
// for. A probe that fails for another reason than a missing feature
// fails t.
func requireSockmap(t testing.TB) {
	t.Helper()
	requireRoot(t)
	if err := kvebpf.SockmapSupported(); errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("the kernel lacks what sockmap steering needs: %v", err)
	} else if err != nil {
		t.Fatalf("probing for sockmap support: %v", err)
	}
}
