package kvstore

import (
	"errors"
	"fmt"
	"slices"
)

// GroupKind is the attention kind of a KV cache group of a hybrid model.
type GroupKind uint8

// Group kinds (the values of wire.GroupKind).
const (
	// GroupFull is full attention: a hit needs every block before it.
	GroupFull GroupKind = 1
	// GroupSlidingWindow needs only the blocks inside its window before
	// the hit point.
	GroupSlidingWindow GroupKind = 2
	// GroupMamba (linear attention, state-space layers) needs its state at
	// the hit point: the group block that ends there.
	GroupMamba GroupKind = 3
)

// ErrBadGroup says a group spec cannot be indexed.
var ErrBadGroup = errors.New("kvstore: invalid KV cache group")

// Group is one KV cache group as the index matches it, in hash blocks (the
// engine's hashing block size, the one its Hasher uses).
type Group struct {
	Kind GroupKind
	// Stride is the group's block size in hash blocks (at least 1). A group
	// block is named by the chained hash of its last hash block, so block j
	// of the group is hash block (j+1)*Stride-1 of the prompt.
	Stride int
	// WindowBlocks (sliding window) is how many group blocks must be held
	// just before a hit point: vLLM's sliding_window_contiguous_blocks,
	// cdiv(window-1, block size). 0 for the other kinds.
	WindowBlocks int
}

// GroupOf converts a group as engines announce it, in tokens, into the
// index's terms for an engine hashing blocks of hashBlock tokens; window is
// a sliding window's span in tokens (the computed token included, as vLLM's
// SlidingWindowSpec.sliding_window).
func GroupOf(kind GroupKind, blockSize, window, hashBlock int) (Group, error) {
	if hashBlock < 1 || blockSize < hashBlock || blockSize%hashBlock != 0 {
		return Group{}, fmt.Errorf("block size %d over hash block %d: %w", blockSize, hashBlock, ErrBadGroup)
	}
	g := Group{Kind: kind, Stride: blockSize / hashBlock}
	switch kind {
	case GroupFull, GroupMamba:
	case GroupSlidingWindow:
		if window < 1 {
			return Group{}, fmt.Errorf("sliding window of %d tokens: %w", window, ErrBadGroup)
		}
		g.WindowBlocks = (window - 1 + blockSize - 1) / blockSize
	default:
		return Group{}, fmt.Errorf("kind %d: %w", kind, ErrBadGroup)
	}
	return g, nil
}

func (g Group) validate() error {
	if g.Kind < GroupFull || g.Kind > GroupMamba || g.Stride < 1 || g.WindowBlocks < 0 ||
		(g.Kind != GroupSlidingWindow && g.WindowBlocks != 0) {
		return fmt.Errorf("%+v: %w", g, ErrBadGroup)
	}
	return nil
}

// fast says the group is matched by the leading-run walk alone, as a
// model with one KV cache is: full attention at the hash block size.
func (g Group) fast() bool { return g.Kind == GroupFull && g.Stride == 1 }

// hybrid says an engine with these groups needs the hybrid hit rule.
func hybrid(gs []Group) bool { return len(gs) > 1 || (len(gs) == 1 && !gs[0].fast()) }

// groupSlots takes one slot for each group of an engine's rank after the
// first (which is the rank's own slot, s); ix.mu is held for writing.
func (ix *Index) groupSlots(s Slot, gs []Group) {
	st := &ix.slots[s]
	st.group = gs[0]
	members := []Slot{s}
	for _, g := range gs[1:] {
		m := ix.takeSlot()
		ms := &ix.slots[m]
		*ms = slotState{engine: st.engine, rank: st.rank, inUse: true, owner: s, groupIdx: len(members), group: g,
			capacity: st.capacity, gen: ms.gen, passGen: ms.passGen, safeGen: ms.safeGen, entries: ms.entries}
		members = append(members, m)
	}
	ix.slots[s].members, ix.slots[s].groups = members, slices.Clone(gs)
}

// takeSlot returns a free slot (reused, or new); ix.mu is held.
func (ix *Index) takeSlot() Slot {
	if n := len(ix.free); n > 0 {
		s := ix.free[n-1]
		ix.free = ix.free[:n-1]
		return s
	}
	ix.slots = append(ix.slots, slotState{})
	return Slot(len(ix.slots) - 1)
}

// groupSlot returns the slot holding group g of rank slot s.
func (ix *Index) groupSlot(s Slot, g uint16) (Slot, bool) {
	st := &ix.slots[s]
	if st.members == nil {
		return s, g == 0
	}
	if int(g) >= len(st.members) {
		return 0, false
	}
	return st.members[g], true
}

// rankSlots counts the slots an engine config takes.
func slotsPerRank(cfg *EngineConfig) int { return max(1, len(cfg.Groups)) }

// membersOf returns the slots of rank slot s's groups (s alone without
// groups); ix.mu is held.
func (ix *Index) membersOf(s Slot) []Slot {
	if m := ix.slots[s].members; m != nil {
		return m
	}
	return []Slot{s}
}
