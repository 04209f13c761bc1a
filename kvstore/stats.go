package kvstore

// EngineStats describes one slot of the index.
type EngineStats struct {
	Engine string
	Rank   int
	// Group is the KV cache group of a hybrid engine the slot holds (0
	// for an engine without groups, and for a rank's own slot).
	Group int
	Slot  Slot
	// Blocks are the blocks held per tier, TierApprox last.
	Blocks [numTiers]uint64
	// Precise says the slot has had KV events: it holds no approximate
	// entries (Index.Precise).
	Precise bool
	// Entries are the table entries of the slot (one per block, whatever its
	// tiers), including stale ones not yet swept.
	Entries uint64
	// Bytes is the slot's share of the table memory: Entries over all entries
	// times the bytes of all shards.
	Bytes uint64
}

// Stats describes the whole index.
type Stats struct {
	// Entries are occupied table positions (stale ones included until swept).
	Entries uint64
	// Positions is the table size in entries; Bytes its memory.
	Positions uint64
	Bytes     uint64
	// EventsApplied and BlocksApplied count what Apply and Replace processed.
	EventsApplied, BlocksApplied uint64
	Engines                      []EngineStats
}

// Stats returns the index's statistics.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var s Stats
	for i := range ix.shards {
		s.Entries += uint64(ix.shards[i].used)
		s.Positions += uint64(len(ix.shards[i].entries))
	}
	s.Bytes = s.Positions * entrySize
	s.EventsApplied, s.BlocksApplied = ix.stats.eventsApplied, ix.stats.blocksApplied
	for i := range ix.slots {
		st := &ix.slots[i]
		if !st.inUse {
			continue
		}
		es := EngineStats{Engine: st.engine, Rank: st.rank, Group: st.groupIdx, Slot: Slot(i), Blocks: st.blocks, Precise: st.precise, Entries: st.entries}
		if s.Entries > 0 {
			es.Bytes = uint64(float64(s.Bytes) * float64(st.entries) / float64(s.Entries))
		}
		s.Engines = append(s.Engines, es)
	}
	return s
}
