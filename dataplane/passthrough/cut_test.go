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
		want int
	}{
		{ebpf.ErrDuplicated, CutDuplicated},
		{fmt.Errorf("steering: %w", ebpf.ErrDuplicated), CutDuplicated},
		{ebpf.ErrTruncated, CutTruncated},
		{context.Canceled, CutOther},
		{syscall.ECONNRESET, CutOther},
	} {
		if got := cutReason(c.err); got != c.want {
			t.Errorf("%v: counted as %s, want %s", c.err, CutNames[got], CutNames[c.want])
		}
	}
}
