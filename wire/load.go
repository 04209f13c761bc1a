package wire

// TierUsage is a tier's KV usage in blocks.
type TierUsage struct {
	Tier        Tier
	Used, Total uint64
}

// Load is the LOAD frame: an engine rank's report of its own scheduler
// state, sent periodically and on LOAD_REQUEST. It is what the engine says it
// has queued; the work routers have sent it and not seen finish is
// syncring.Load, a different thing.
//
//	| dp_rank u16 | reserved u16 | running u32 | waiting u32 | reserved u32 |
//	| queued_prefill_tokens u64 | active_decode_tokens u64 | timestamp_ns i64 |
//	| tiers u8 n | reserved [7] | (tier u8, reserved [7], used u64, total u64) x n |
type Load struct {
	DPRank uint16
	// Running and Waiting are request counts in the batch and in the queue.
	Running, Waiting uint32
	// QueuedPrefillTokens are prompt tokens still to prefill (waiting and
	// partially prefilled requests, cached tokens excluded).
	QueuedPrefillTokens uint64
	// ActiveDecodeTokens are the KV tokens of the requests decoding now.
	ActiveDecodeTokens uint64
	TimestampNano      int64
	Tiers              []TierUsage
}

// Type implements Message.
func (*Load) Type() Type { return TypeLoad }

// AppendPayload implements Message.
func (m *Load) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u16(m.DPRank)
	e.zero(2)
	e.u32(m.Running)
	e.u32(m.Waiting)
	e.zero(4)
	e.u64(m.QueuedPrefillTokens)
	e.u64(m.ActiveDecodeTokens)
	e.u64(uint64(m.TimestampNano))
	if e.fits(len(m.Tiers), NumTiers, "tiers") {
		e.u8(uint8(len(m.Tiers)))
		e.zero(7)
		for _, t := range m.Tiers {
			e.u8(uint8(t.Tier))
			e.zero(7)
			e.u64(t.Used)
			e.u64(t.Total)
		}
	}
	return e.b, e.err
}

// Decode implements Message. Tiers reuses its capacity.
func (m *Load) Decode(p []byte, _ *Limits) error {
	c := cursor{b: p}
	m.DPRank = c.u16("dp_rank")
	c.zero(2, "reserved")
	m.Running = c.u32("running")
	m.Waiting = c.u32("waiting")
	c.zero(4, "reserved")
	m.QueuedPrefillTokens = c.u64("queued_prefill_tokens")
	m.ActiveDecodeTokens = c.u64("active_decode_tokens")
	m.TimestampNano = int64(c.u64("timestamp"))
	n := c.count(1, 24, NumTiers, "tiers")
	c.zero(7, "reserved")
	m.Tiers = m.Tiers[:0]
	for range n {
		t := Tier(c.u8("tier"))
		if t >= NumTiers {
			c.fail(ErrBadValue, "tier")
		}
		c.zero(7, "reserved")
		m.Tiers = append(m.Tiers, TierUsage{Tier: t, Used: c.u64("used"), Total: c.u64("total")})
	}
	return c.done("LOAD")
}
