package ebpf

import (
	"strings"
	"testing"
)

// TestBodyDiff: bodyDiff describes a reorder, a loss and a duplicate (the
// shape of the kernel bug TestSlowClient guards against), and a match is
// no difference.
func TestBodyDiff(t *testing.T) {
	const n = 1 << 16
	if d := bodyDiff(body(5, n), 5, n); d != "" {
		t.Fatalf("the body itself: %s", d)
	}
	b := body(5, n)
	swapped := append(append(append([]byte(nil), b[:1000]...), b[3000:5000]...), b[1000:3000]...)
	swapped = append(swapped, b[5000:]...)
	d := bodyDiff(swapped, 5, n)
	for _, want := range []string{"first difference at 1000", "are the body's bytes at 3000 (+2000)", "arrive 2000 bytes later, at 3000"} {
		if !strings.Contains(d, want) {
			t.Errorf("reordered: %q lacks %q", d, want)
		}
	}
	dup := append(append([]byte(nil), b[:8192]...), b[4096:n-4096]...)
	d = bodyDiff(dup, 5, n)
	for _, want := range []string{"65536 bytes, want 65536", "at 8192 are the body's bytes at 4096 (-4096)", "arrive 4096 bytes later"} {
		if !strings.Contains(d, want) {
			t.Errorf("duplicated: %q lacks %q", d, want)
		}
	}
	lost := append(append([]byte(nil), b[:4096]...), b[8192:]...)
	d = bodyDiff(lost, 5, n)
	for _, want := range []string{"61440 bytes, want 65536", "at 4096 are the body's bytes at 8192 (+4096)", "never arrive"} {
		if !strings.Contains(d, want) {
			t.Errorf("lost: %q lacks %q", d, want)
		}
	}
}
