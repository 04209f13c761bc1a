package wire

import (
	"fmt"
	"testing"
)

// TestEnumStrings: the protocol's enums print as PROTOCOL.md names them,
// and values it does not define print as numbers.
func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{CancelClientGone, "client_gone"}, {CancelTimeout, "timeout"}, {CancelShutdown, "shutdown"},
		{CancelRerouted, "rerouted"}, {CancelReason(9), "cancel_9"},
		{RoleRouter, "router"}, {RoleEngine, "engine"}, {RolePeer, "peer"}, {Role(0), "role_0"},
		{HashScheme(0), "none"}, {HashXXH3Chained, "xxh3-chained"}, {HashScheme(2), "hash_scheme_2"},
		{TierGPU, "gpu"}, {TierCPU, "cpu"}, {TierDisk, "disk"}, {Tier(3), "tier_3"},
		{CodecNone, "none"}, {CodecS2, "s2"}, {CodecZstd, "zstd"}, {Codec(3), "codec_3"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if got := c.v.String(); got != c.want {
				t.Errorf("%T(%d) is %q, want %q", c.v, c.v, got, c.want)
			}
		})
	}
}
