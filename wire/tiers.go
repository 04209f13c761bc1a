package wire

// TierLink is how fast an engine loads KV blocks of one of its lower tiers
// back into the GPU: a latency per load plus the blocks' bytes over the
// bandwidth. Routers weigh a lower-tier hit by it (PROTOCOL.md 4.1).
type TierLink struct {
	Tier Tier
	// LatencyNanos is paid once per load from the tier.
	LatencyNanos uint32
	// BytesPerSecond is the tier's bandwidth into the GPU.
	BytesPerSecond uint64
}

// TierCosts is the optional tier-cost section of a WELCOME, present when
// its FeatureTierCosts bit is set (PROTOCOL.md 4.1):
//
//	| block_bytes u64 | links u8 n | reserved [7] |
//	| (tier u8, reserved [3], latency_ns u32, bytes_per_s u64) x n |
//
// A HELLO never carries it: a dialer's FeatureTierCosts only says that it
// reads the section, and an acceptor sends it only to such a dialer, so
// peers from before the section meet handshakes they can decode.
type TierCosts struct {
	// BlockBytes is the KV size of one block, all layers (the model's
	// bytes per token times block_size).
	BlockBytes uint64
	// Links are the lower tiers' links, at most one per tier.
	Links []TierLink
}

// Link returns the announced link of tier t.
func (tc *TierCosts) Link(t Tier) (TierLink, bool) {
	for _, l := range tc.Links {
		if l.Tier == t {
			return l, true
		}
	}
	return TierLink{}, false
}

// empty reports whether there is nothing to announce.
func (tc *TierCosts) empty() bool { return tc.BlockBytes == 0 && len(tc.Links) == 0 }

func (tc *TierCosts) append(e *encoder) {
	e.u64(tc.BlockBytes)
	if e.fits(len(tc.Links), NumTiers, "tier links") {
		e.u8(uint8(len(tc.Links)))
		e.zero(7)
		for _, l := range tc.Links {
			e.u8(uint8(l.Tier))
			e.zero(3)
			e.u32(l.LatencyNanos)
			e.u64(l.BytesPerSecond)
		}
	}
}

func (tc *TierCosts) decode(c *cursor) {
	tc.BlockBytes = c.u64("block_bytes")
	n := c.count(1, 16, NumTiers, "tier links")
	c.zero(7, "reserved")
	if n > 0 {
		tc.Links = make([]TierLink, n)
	}
	for i := range tc.Links {
		t := Tier(c.u8("link tier"))
		if t >= NumTiers {
			c.fail(ErrBadValue, "link tier")
		}
		c.zero(3, "reserved")
		tc.Links[i] = TierLink{Tier: t, LatencyNanos: c.u32("latency_ns"), BytesPerSecond: c.u64("bytes_per_s")}
	}
}
