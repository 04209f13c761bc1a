package wire

import "fmt"

// FeatureHybridGroups, in a HELLO, says the dialer reads a WELCOME's groups
// section and keeps KV events of different groups apart; in a WELCOME, that
// the groups section follows the context section (if any):
//
//	| n u8 | reserved [7] | n x (kind u8 | reserved [3] | block_size u32 | window u32 | reserved [4]) |
//
// A hybrid model (gpt-oss, Gemma 3: full and sliding-window attention;
// Qwen3-Next, Kimi: full and linear/Mamba layers) keeps one KV cache per
// group, each with its own block table, and reports each group's blocks in
// KV events with Event.Group, the group's index in this list. As with the
// tier costs (PROTOCOL.md 4.1), an acceptor sends the section only to a
// dialer whose HELLO set the bit, so peers from before it keep decoding
// every handshake; a dialer without the bit sees the events' group field
// and, as before, ignores it.

// GroupKind is the attention kind of a KV cache group, which decides which
// of its blocks a prefix-cache hit needs.
type GroupKind uint8

// Group kinds, as vLLM's coordinator treats them (kvstore's Match cites
// the source).
const (
	// GroupFull is full attention: a hit of L tokens needs every block
	// up to L.
	GroupFull GroupKind = 1
	// GroupSlidingWindow attends to the last Window tokens: a hit of L
	// tokens needs only the blocks covering the Window-1 tokens before L.
	GroupSlidingWindow GroupKind = 2
	// GroupMamba is a linear-attention or Mamba (state-space) layer: a
	// hit of L tokens needs the state after token L, which the engine
	// keeps at block boundaries (one block per kept state).
	GroupMamba GroupKind = 3
)

var groupKindNames = [...]string{"", "full", "sliding_window", "mamba"}

// String returns the kind's name as PROTOCOL.md writes it.
func (k GroupKind) String() string {
	if k >= GroupFull && k <= GroupMamba {
		return groupKindNames[k]
	}
	return fmt.Sprintf("group_kind_%d", uint8(k))
}

// Group is one KV cache group an engine announces.
type Group struct {
	Kind GroupKind
	// BlockSize is the group's tokens per block: a multiple of the
	// handshake's block_size (the hash block). A block of the group is
	// named in KV events by the chained hash of its last hash block.
	BlockSize uint32
	// Window is a sliding-window group's window in tokens (the token
	// being computed included, as vLLM's sliding_window); 0 for the other
	// kinds.
	Window uint32
}

// MaxGroups bounds the groups one engine announces (vLLM's largest hybrid
// layouts have a few; a model with one group per layer kind has at most
// three kinds).
const MaxGroups = 64

func appendGroups(e *encoder, gs []Group) {
	if !e.fits(len(gs), MaxGroups, "groups") {
		return
	}
	e.u8(uint8(len(gs)))
	e.zero(7)
	for _, g := range gs {
		e.u8(uint8(g.Kind))
		e.zero(3)
		e.u32(g.BlockSize)
		e.u32(g.Window)
		e.zero(4)
	}
}

func decodeGroups(c *cursor, hashBlock uint32) []Group {
	n := c.count(1, 16, MaxGroups, "groups")
	c.zero(7, "reserved")
	if c.err != nil {
		return nil
	}
	if n == 0 {
		c.fail(ErrBadValue, "groups (the section lists at least one)")
		return nil
	}
	gs := make([]Group, n)
	for i := range gs {
		g := &gs[i]
		g.Kind = GroupKind(c.u8("group kind"))
		c.zero(3, "reserved")
		g.BlockSize = c.u32("group block_size")
		g.Window = c.u32("group window")
		c.zero(4, "reserved")
		if c.err != nil {
			return nil
		}
		if err := g.validate(hashBlock); err != nil {
			c.fail(fmt.Errorf("group %d: %w: %w", i, err, ErrBadValue), "groups")
			return nil
		}
	}
	return gs
}

// validate says what is wrong with g for an engine whose hash block is
// hashBlock tokens, naming the field.
func (g *Group) validate(hashBlock uint32) error {
	switch {
	case g.Kind < GroupFull || g.Kind > GroupMamba:
		return fmt.Errorf("group kind %d", g.Kind)
	case g.BlockSize == 0 || hashBlock == 0 || g.BlockSize%hashBlock != 0:
		return fmt.Errorf("group block_size %d (a multiple of block_size %d)", g.BlockSize, hashBlock)
	case g.Kind == GroupSlidingWindow && g.Window == 0:
		return fmt.Errorf("group window 0 (a sliding window needs one)")
	case g.Kind != GroupSlidingWindow && g.Window != 0:
		return fmt.Errorf("group window %d (only a sliding window has one)", g.Window)
	}
	return nil
}
