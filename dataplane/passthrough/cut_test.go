package passthrough

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/kvgate/kvgate/ebpf"
)

// TestCutReason: the errors that end a relay are counted under the reason
// their metric label names, wrapped or not.
func TestCutReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want CutReason
	}{
		{ebpf.ErrDuplicated, CutDuplicated},
		{fmt.Errorf("steering: %w", ebpf.ErrDuplicated), CutDuplicated},
		{ebpf.ErrTruncated, CutTruncated},
		{context.Canceled, CutOther},
		{syscall.ECONNRESET, CutOther},
	} {
		if got := cutReason(c.err); got != c.want {
			t.Errorf("%v: counted as %s, want %s", c.err, got, c.want)
		}
	}
}

// TestCutReasonString: the reasons' names are the metric's label values,
// which dashboards and alerts select on; they must not change.
func TestCutReasonString(t *testing.T) {
	want := []string{"duplicated", "truncated", "other"}
	if len(CutReasons) != len(want) {
		t.Fatalf("%d reasons, want %d", len(CutReasons), len(want))
	}
	for i, r := range CutReasons {
		if r.String() != want[i] {
			t.Errorf("reason %d is labelled %q, want %q", i, r, want[i])
		}
	}
	if s := numCutReasons.String(); s != "CutReason(3)" {
		t.Errorf("out of range: %q", s)
	}
}
