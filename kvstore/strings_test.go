package kvstore

import (
	"fmt"
	"testing"
)

// TestEnumStrings: tiers and event kinds print by name, undefined values
// as numbers.
func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{TierGPU, "gpu"}, {TierCPU, "cpu"}, {TierDisk, "disk"}, {TierApprox, "approx"}, {Tier(4), "tier_4"},
		{Stored, "stored"}, {Removed, "removed"}, {Cleared, "cleared"}, {EventKind(0), "event_0"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if got := c.v.String(); got != c.want {
				t.Errorf("%T(%d) is %q, want %q", c.v, c.v, got, c.want)
			}
		})
	}
}
