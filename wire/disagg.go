package wire

import "fmt"

// FeatureDisagg is version 1 of the prefill/decode hand-off (PROTOCOL.md
// 6.10). In a HELLO it says the router sends GENERATE's hand-off section
// and reads TOKENS' hand-off section; in a WELCOME, that the engine
// serves them, in the role its FeaturePrefillOnly and FeatureDecodeOnly
// bits name (neither: both). A router sends the section only to an engine
// that announced the bit, and an engine answers with a hand-off only to a
// GENERATE that asked for one, so peers from before it never see either.
const FeatureDisagg Feature = 1 << 18

// GenHandoff: GENERATE's hand-off section follows the trace section
// (Handoff; only to engines with FeatureDisagg).
const GenHandoff GenerateFlags = 1 << 5

// TokHandoff marks the TOKENS frame in which a prefill engine hands its
// request over: it holds the first token and is followed by the
// kv_transfer section (TokensMsg.KVTransfer). The stream stays open while
// the engine keeps the KV for the decode engine.
const TokHandoff TokensFlags = 1 << 4

// EngineRole is the part an engine plays in disaggregated serving.
type EngineRole uint8

// Engine roles.
const (
	RoleBoth    EngineRole = 0 // prefills and decodes (aggregated serving)
	RolePrefill EngineRole = 1 // prefill only: hands every request over after its first token
	RoleDecode  EngineRole = 2 // decode only: takes requests whose KV was prefilled elsewhere
)

var engineRoleNames = [...]string{"both", "prefill", "decode"}

// String returns the role's name, as kvgate-sim's --role flag spells it.
func (r EngineRole) String() string {
	if int(r) < len(engineRoleNames) {
		return engineRoleNames[r]
	}
	return fmt.Sprintf("role_%d", uint8(r))
}

// ParseEngineRole reads a role name ("prefill", "decode" or "both").
func ParseEngineRole(s string) (EngineRole, error) {
	for i, n := range engineRoleNames {
		if s == n {
			return EngineRole(i), nil
		}
	}
	return 0, fmt.Errorf("engine role %q (want prefill, decode or both): %w", s, ErrBadValue)
}

// Features returns the WELCOME features that announce role r: the role
// bits and FeatureDisagg for prefill and decode, none for both (an engine
// of role both that serves hand-offs adds FeatureDisagg itself).
func (r EngineRole) Features() Feature {
	switch r {
	case RolePrefill:
		return FeatureDisagg | FeatureKVTransfer | FeaturePrefillOnly
	case RoleDecode:
		return FeatureDisagg | FeatureKVTransfer | FeatureDecodeOnly
	}
	return 0
}

// RoleOf returns the role a WELCOME's features announce. Both role bits at
// once, or a role bit without FeatureDisagg (an engine from before the
// hand-off that cannot be reached by it), is an error naming the bits.
func RoleOf(f Feature) (EngineRole, error) {
	p, d := f&FeaturePrefillOnly != 0, f&FeatureDecodeOnly != 0
	switch {
	case p && d:
		return 0, fmt.Errorf("features %#x: both PREFILL_ONLY and DECODE_ONLY: %w", uint32(f), ErrBadValue)
	case (p || d) && f&FeatureDisagg == 0:
		return 0, fmt.Errorf("features %#x: a role bit without DISAGG: %w", uint32(f), ErrBadValue)
	case p:
		return RolePrefill, nil
	case d:
		return RoleDecode, nil
	}
	return RoleBoth, nil
}

// HandoffSide says which half of a hand-off a GENERATE asks for.
type HandoffSide uint8

// Hand-off sides.
const (
	HandoffPrefill HandoffSide = 1 // prefill, answer the first token and keep the KV for Peer
	HandoffDecode  HandoffSide = 2 // load the prompt's KV from Peer (per GENERATE.kv_transfer), then decode
)

// MaxHandoffPeer bounds a hand-off section's peer id in bytes.
const MaxHandoffPeer = 256

// Handoff is GENERATE's hand-off section, present when flag GenHandoff is
// set. Decoding does not allocate: Peer is a view into the payload.
//
//	| side u8 | reserved [3] | deadline_ms u32 | peer str16 |
//
// A prefill side (HandoffPrefill) names the decode engine that will take
// the KV and how long to keep it for it; a decode side names the prefill
// engine that holds it and how long to wait for it, and its GENERATE
// carries in kv_transfer what the prefill engine answered.
type Handoff struct {
	Side HandoffSide
	// DeadlineMillis: prefill, how long the engine keeps the KV after the
	// hand-off frame before it frees it and ends the stream (finish
	// abort); decode, how long it waits for the KV before it ends the
	// stream with ERROR STREAM_FAILED. Non-zero.
	DeadlineMillis uint32
	// Peer is the other engine's handshake id.
	Peer []byte
}

const handoffFixed = 1 + 3 + 4

func (h *Handoff) size() int { return handoffFixed + 2 + len(h.Peer) }

func (h *Handoff) append(e *encoder) {
	e.u8(uint8(h.Side))
	e.zero(3)
	e.u32(h.DeadlineMillis)
	e.str16(h.Peer, "handoff peer")
}

func (h *Handoff) decode(c *cursor) {
	h.Side = HandoffSide(c.u8("handoff side"))
	c.zero(3, "handoff reserved")
	h.DeadlineMillis = c.u32("handoff deadline_ms")
	h.Peer = c.str16("handoff peer")
}

// validate checks the section and, for a decode side, that the GENERATE
// carries transfer parameters (kvTransfer is its length).
func (h *Handoff) validate(kvTransfer int) error {
	switch {
	case h.Side != HandoffPrefill && h.Side != HandoffDecode:
		return fmt.Errorf("handoff side %d: %w", h.Side, ErrBadValue)
	case h.DeadlineMillis == 0:
		return fmt.Errorf("handoff deadline_ms 0: %w", ErrBadValue)
	case len(h.Peer) == 0 || len(h.Peer) > MaxHandoffPeer:
		return fmt.Errorf("handoff peer of %d bytes (1..%d): %w", len(h.Peer), MaxHandoffPeer, ErrBadValue)
	case h.Side == HandoffDecode && kvTransfer == 0:
		return fmt.Errorf("handoff decode side without kv_transfer: %w", ErrBadValue)
	}
	return nil
}

// appendKVTransfer writes a hand-off frame's kv_transfer section.
func (m *TokensMsg) appendKVTransfer(e *encoder) {
	if e.err == nil && (len(m.KVTransfer) == 0 || !m.First() || m.Tokens.Len() != 1) {
		e.err = fmt.Errorf("encoding TOKENS: a hand-off frame needs FIRST, one token and kv_transfer: %w", ErrBadValue)
		return
	}
	e.bytes32(m.KVTransfer, "kv_transfer")
}

// decodeKVTransfer reads a hand-off frame's kv_transfer section.
func (m *TokensMsg) decodeKVTransfer(c *cursor) {
	m.KVTransfer = c.bytes32("kv_transfer")
	if c.err == nil && (len(m.KVTransfer) == 0 || !m.First() || m.Last() || m.Tokens.Len() != 1) {
		c.fail(fmt.Errorf("a hand-off frame must be FIRST, not LAST, with one token and kv_transfer: %w", ErrBadValue), "kv_transfer")
	}
}
