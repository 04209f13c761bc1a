package kvstore

// Hybrid matching: the prefix-cache hit of an engine whose KV cache is split
// into groups of different attention kinds, computed as vLLM's
// HybridKVCacheCoordinator.find_longest_cache_hit does
// (vllm-project/vllm vllm/v1/core/kv_cache_coordinator.py, and the managers
// in vllm/v1/core/single_type_kv_cache_manager.py, commit
// 00b08dc44519a82cbdd9061d92d1226985094622):
//
//   - every manager returns the longest hit not over the length it is given
//     (max_length), starting from the prompt's cacheable length; full
//     attention first, then the others; while one shortens the hit, all
//     are asked again. The fixed point is the longest length L that every
//     group can serve, so Match computes that directly.
//   - FullAttentionManager: the leading run of held blocks (a miss ends
//     it: hashes are chained), so every L up to the run serves.
//   - SlidingWindowManager: scanning from the right, the first run of
//     sliding_window_contiguous_blocks = cdiv(sliding_window-1, block_size)
//     held blocks ends the hit; with no such run, the held blocks from the
//     prompt's start. So L serves when the W group blocks before L are held,
//     or every block before L when L has fewer than W (and the block
//     before L is held in any case: a run is counted from a held block).
//   - MambaManager: the rightmost held block ends the hit (its state is
//     the state at that point), so L serves when the group block ending at
//     L is held.
//   - hits are multiples of the scheduler block size, the LCM of the
//     groups' block sizes (the coordinator's cache_hit_alignment_tokens;
//     Mamba and sliding-window managers skip unaligned ends).
//
// What kvgate does not model: EAGLE's dropped last block, vLLM's
// fine-grained partial hits (enable_partial_hash_hits) and sparse
// retention (prefix_cache_retention_interval), which change which blocks an
// engine keeps but are seen here through its events all the same.

// hybridCand is one hybrid candidate of a Match call.
type hybridCand struct {
	cand int  // index in Match's cands and out
	slot Slot // the rank's slot
}

// addHybrid makes the fast groups of rank slot s (full attention at the
// hash block size) candidates of the walk, which finds their leading runs
// as it finds a one-cache engine's; the other groups are looked up after
// it, only where the hit rule asks (hybridHit), so that the walk's inner
// loop is the one-cache engines' own.
func (ix *Index) addHybrid(m *matcher, c int, s Slot) {
	st := &ix.slots[s]
	for gi, ms := range st.members {
		if st.groups[gi].fast() {
			m.state[ms] = candState{stamp: m.stamp, gen: packGen(&ix.slots[ms].gen)}
		}
	}
	m.hyb = append(m.hyb, hybridCand{cand: c, slot: s})
}

// hybridHit returns the hit of rank slot s over the prompt's hashes once
// the walk has found its fast groups' runs (the bound of the hit; the
// whole prompt without one).
func (ix *Index) hybridHit(m *matcher, s Slot, hashes []uint64) Match {
	st := &ix.slots[s]
	limit := len(hashes)
	var counts *[numTiers]uint32
	for gi, ms := range st.members {
		if c := &m.state[ms]; st.groups[gi].fast() {
			limit = min(limit, int(c.depth))
			if counts == nil {
				counts = &c.counts
			}
		}
	}
	hit := HybridHit(st.groups, limit, func(g, j int) bool {
		if st.groups[g].fast() {
			return j < limit // within every fast group's run
		}
		return ix.holds(st.members[g], hashes[(j+1)*st.groups[g].Stride-1])
	})
	return splitHit(hit, counts)
}

// holds reports whether slot holds block h in any tier.
func (ix *Index) holds(slot Slot, h uint64) bool {
	sh := &ix.shards[h>>(64-shardBits)]
	i := sh.find(h, uint16(slot))
	return i >= 0 && ix.validTiers(&sh.entries[i]) != 0
}

// HybridHit returns the longest prefix-cache hit, in hash blocks and at
// most limit, that every group of a hybrid engine can serve, as vLLM's
// coordinator finds it (the rules above); held(g, j) reports whether group
// g holds its block j. It is the index's rule, exported for engines that
// model one (perf/sim).
func HybridHit(groups []Group, limit int, held func(g, j int) bool) int {
	align := 1
	for gi, g := range groups {
		align = lcm(align, g.Stride)
		if g.Kind == GroupFull {
			run := 0
			for (run+1)*g.Stride <= limit && held(gi, run) {
				run++
			}
			limit = min(limit, run*g.Stride)
		}
	}
	for l := limit - limit%align; l > 0; l -= align {
		if serves(groups, l, held) {
			return l
		}
	}
	return 0
}

// serves reports whether every group that is not full attention can serve
// a hit of l blocks (a multiple of every group's stride).
func serves(groups []Group, l int, held func(g, j int) bool) bool {
	for gi, g := range groups {
		nb := l / g.Stride // group blocks before the hit point
		switch g.Kind {
		case GroupMamba:
			if !held(gi, nb-1) {
				return false
			}
		case GroupSlidingWindow:
			for j := nb - 1; j >= max(0, nb-max(g.WindowBlocks, 1)); j-- {
				if !held(gi, j) {
					return false
				}
			}
		}
	}
	return true
}

// splitHit reports a hybrid hit of hit blocks by tier: from the leading run
// of a fast full-attention group when there is one, best tier first (its
// counts say how many of its run each tier holds, not where, so the hit is
// taken from the best tiers), else as GPU blocks.
func splitHit(hit int, counts *[numTiers]uint32) Match {
	var out Match
	left := uint32(hit)
	if counts == nil {
		out.Blocks[TierGPU] = left
		return out
	}
	for t := range Tier(NumTiers) {
		n := min(left, counts[t])
		out.Blocks[t], left = n, left-n
	}
	out.Approx = min(left, counts[TierApprox])
	return out
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}
