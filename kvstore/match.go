package kvstore

import (
	"encoding/binary"
	"math/bits"
)

// Match is what one candidate holds of a prompt: the length of its leading
// run of held blocks, split by the best tier holding each block.
type Match struct {
	// Blocks counts leading blocks by best tier: GPU, CPU, disk.
	Blocks [NumTiers]uint32
	// Approx counts leading blocks known only from routing decisions
	// (approximate mode): they extend the run like GPU blocks.
	Approx uint32
}

// Depth returns the number of leading blocks held in any tier.
func (m Match) Depth() int {
	return int(m.Blocks[TierGPU] + m.Blocks[TierCPU] + m.Blocks[TierDisk] + m.Approx)
}

// matcher is per-call scratch, pooled so Match does not allocate. Its state
// is indexed by slot, so the inner loop goes from an entry to its
// candidate's state with one load.
type matcher struct {
	stamp uint32
	state []candState // per slot; valid where stamp matches
	sink  uint64      // prefetchRuns results, never read
	// hyb are the hybrid candidates of this call (hybrid.go).
	hyb []hybridCand
}

type candState struct {
	stamp  uint32 // == matcher.stamp when the slot is a candidate of this call
	depth  uint32 // blocks matched so far
	gen    uint32 // the slot's generations, one byte per tier
	counts [numTiers]uint32
}

func (m *matcher) reset(nSlots int) {
	if len(m.state) < nSlots {
		m.state = make([]candState, nSlots+nSlots/2)
		m.stamp = 0
	}
	if m.stamp++; m.stamp == 0 { // wrapped: old stamps could collide
		clear(m.state)
		m.stamp = 1
	}
}

// Match computes, for each candidate slot, how many leading blocks of the
// prompt (its chained block hashes) it holds and in which tiers; out[i]
// answers cands[i] and must be at least as long. A block counts at the best
// tier holding it; a candidate's run stops at its first missing block; the
// walk stops when no candidate advanced. Unknown or removed slots match
// nothing. For a hybrid engine (EngineConfig.Groups) the answer is the hit
// its engine's coordinator would compute from the groups' holdings
// (hybrid.go). It does not allocate once warm.
func (ix *Index) Match(hashes []uint64, cands []Slot, out []Match) {
	out = out[:len(cands)]
	m := ix.matchers.Get().(*matcher)
	defer ix.matchers.Put(m)

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	m.reset(len(ix.slots))
	m.hyb = m.hyb[:0]
	for c, s := range cands {
		if int(s) < len(ix.slots) && ix.slots[s].inUse && ix.slots[s].owner == s {
			if st := &ix.slots[s]; st.members == nil {
				m.state[s] = candState{stamp: m.stamp, gen: packGen(&st.gen)}
			} else {
				ix.addHybrid(m, c, s)
			}
		}
	}
	ix.walk(m, hashes)
	for c, s := range cands {
		out[c] = Match{}
		if int(s) < len(ix.slots) && m.state[s].stamp == m.stamp {
			k := &m.state[s].counts
			out[c] = Match{Blocks: [NumTiers]uint32{k[TierGPU], k[TierCPU], k[TierDisk]}, Approx: k[TierApprox]}
		}
	}
	for _, h := range m.hyb {
		out[h.cand] = ix.hybridHit(m, h.slot, hashes)
	}
}

// walk matches blocks in groups, asking for the next group's entries
// while it matches this one, so the cache misses overlap with the work. It
// asks for two lines per block, as run reads four entries from the home
// position. A group past the last matching block costs only its prefetches.
func (ix *Index) walk(m *matcher, hashes []uint64) {
	m.sink += ix.prefetchRuns(hashes, true)
	for g := 0; g < len(hashes); g += prefetchGroup {
		m.sink += ix.prefetchRuns(hashes[min(g+prefetchGroup, len(hashes)):], true)
		for k, h := range hashes[g:min(g+prefetchGroup, len(hashes))] {
			if ix.matchBlock(m, h, uint32(g+k)) == 0 {
				return
			}
		}
	}
}

// matchBlock advances every candidate that holds block i (hash h) after
// holding blocks 0..i-1, and returns how many advanced.
func (ix *Index) matchBlock(m *matcher, h uint64, i uint32) int {
	t := &ix.shards[h>>(64-shardBits)]
	j := t.run(h)
	if j < 0 {
		return 0
	}
	es := t.entries
	state := m.state
	advanced := 0
	for {
		e := &es[j]
		if e.hash != h || e.tiers == 0 {
			return advanced
		}
		if int(e.slot) < len(state) {
			c := &state[e.slot]
			if c.stamp == m.stamp && c.depth == i {
				valid := e.tiers
				if g := packGen(&e.gen); g != c.gen {
					valid &= genEqual(g, c.gen)
				}
				if valid != 0 {
					c.counts[bits.TrailingZeros8(valid)&(numTiers-1)]++
					c.depth++
					advanced++
				}
			}
		}
		if j++; j == len(es) {
			j = 0
		}
	}
}

// packGen reads four per-tier generation bytes as one word.
func packGen(g *[numTiers]uint8) uint32 { return binary.LittleEndian.Uint32(g[:]) }

// genEqual returns a 4-bit mask with bit t set where byte t of a and b agree.
func genEqual(a, b uint32) uint8 {
	x := a ^ b
	// 0x80 in each byte of x that is zero (the classic "has zero byte" trick,
	// exact because the high bit of each byte is handled apart).
	z := ^((x&0x7f7f7f7f + 0x7f7f7f7f) | x | 0x7f7f7f7f)
	return uint8(((z >> 7) & 0x01010101) * 0x01020408 >> 24)
}
