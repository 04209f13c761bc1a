package sim

import "github.com/kvgate/kvgate/kvstore"

// setGroups makes the pool a hybrid model's (hybrid.go): one prefix cache
// per group over the one pool of blocks. The first full-attention group's
// cache is also m.cached, which the one-cache paths (heldRun, holds,
// lookupGPU: the LOAD's queued-prefill estimate, the oracle) read; with no
// full group they see an empty one.
func (m *blockManager) setGroups(groups []kvstore.Group) {
	m.groups = make([]map[uint64]int32, len(groups))
	m.cached = nil
	for g, gr := range groups {
		m.groups[g] = make(map[uint64]int32)
		if gr.Kind == kvstore.GroupFull && m.cached == nil {
			m.cached = m.groups[g]
		}
	}
	if m.cached == nil {
		m.cached = map[uint64]int32{}
	}
}

// commitGroup registers block b as group g's block of hash h and reports
// whether it did: when the group already caches h (two requests computed
// it at once), b stays uncached, as in vLLM.
func (m *blockManager) commitGroup(b int32, g uint16, h, parent uint64, hasParent bool) bool {
	cache := m.groups[g]
	if _, dup := cache[h]; dup {
		return false
	}
	blk := &m.blocks[b]
	blk.hash, blk.parent, blk.hasParent, blk.hashed, blk.group = h, parent, hasParent, true, g
	cache[h] = b
	m.events = append(m.events, kvstore.Event{Kind: kvstore.Stored, Tier: kvstore.TierGPU, Group: g,
		HasParent: hasParent, Parent: parent, Hashes: []uint64{h}})
	return true
}

// groupSnapshot returns every group's cached blocks as STORED events.
func (m *blockManager) groupSnapshot() []kvstore.Event {
	var out []kvstore.Event
	for g, cache := range m.groups {
		for h, b := range cache {
			blk := &m.blocks[b]
			out = append(out, kvstore.Event{Kind: kvstore.Stored, Tier: kvstore.TierGPU, Group: uint16(g),
				HasParent: blk.hasParent, Parent: blk.parent, Hashes: []uint64{h}})
		}
	}
	return out
}
