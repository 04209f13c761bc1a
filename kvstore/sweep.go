package kvstore

// sweepCursor is the next shard the incremental sweeper visits.
type sweepCursor struct{ shard int }

// Sweep removes stale entries (left by cleared tiers and removed engines)
// from the next n shards, taking the write lock once per shard so matching
// never waits for more than one shard, and returns how many entries it
// removed. Call it periodically; a full pass visits every shard once.
func (ix *Index) Sweep(n int) int {
	removed := 0
	for range n {
		ix.mu.Lock()
		removed += ix.sweepNextLocked()
		ix.mu.Unlock()
	}
	return removed
}

func (ix *Index) sweepNextLocked() int {
	if ix.sweep.shard == 0 {
		for s := range ix.slots {
			ix.slots[s].passGen = ix.slots[s].gen
		}
	}
	removed := ix.sweepShardLocked(&ix.shards[ix.sweep.shard])
	if invariants {
		ix.shards[ix.sweep.shard].check()
	}
	if ix.sweep.shard++; ix.sweep.shard == numShards {
		// Every entry older than the pass start is gone.
		ix.sweep.shard = 0
		for s := range ix.slots {
			ix.slots[s].safeGen = ix.slots[s].passGen
		}
	}
	return removed
}

// sweepAllLocked finishes the current pass and runs one more whole pass.
func (ix *Index) sweepAllLocked() {
	for ix.sweep.shard != 0 {
		ix.sweepNextLocked()
	}
	for range numShards {
		ix.sweepNextLocked()
	}
}

func (ix *Index) sweepShardLocked(t *table) int {
	removed := 0
	for i := 0; i < len(t.entries); {
		e := &t.entries[i]
		if e.tiers == 0 {
			i++
			continue
		}
		valid := ix.validTiers(e)
		if valid != 0 {
			e.tiers = valid
			e.gen = ix.slots[e.slot].gen
			i++
			continue
		}
		ix.slots[e.slot].entries--
		t.remove(i) // a later entry may shift into i: look at i again
		removed++
	}
	return removed
}
