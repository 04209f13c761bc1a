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

// matcher is per-call scratch, pooled so Match does not allocate.
type matcher struct {
	stamp uint32
	slot  []slotMark // per slot
	cand  []candState
	sink  uint64 // prefetch results, never read
}

// slotMark says whether a slot is a candidate of the current call (stamp)
// and which one.
type slotMark struct {
	stamp uint32
	cand  int32
}

type candState struct {
	depth  uint32
	gen    uint32 // the slot's generations, one byte per tier
	counts [numTiers]uint32
}

func (m *matcher) reset(nSlots, nCands int) {
	if len(m.slot) < nSlots {
		m.slot = make([]slotMark, nSlots+nSlots/2)
		m.stamp = 0
	}
	if m.stamp++; m.stamp == 0 { // wrapped: old stamps could collide
		clear(m.slot)
		m.stamp = 1
	}
	if cap(m.cand) < nCands {
		m.cand = make([]candState, nCands)
	}
	m.cand = m.cand[:nCands]
}

// Match computes, for each candidate slot, how many leading blocks of the
// prompt (its chained block hashes) it holds and in which tiers; out[i]
// answers cands[i] and must be at least as long. A block counts at the best
// tier holding it; a candidate's run stops at its first missing block; the
// walk stops when no candidate advanced. Unknown or removed slots match
// nothing. It does not allocate once warm.
func (ix *Index) Match(hashes []uint64, cands []Slot, out []Match) {
	out = out[:len(cands)]
	clear(out)
	m := ix.matchers.Get().(*matcher)
	defer ix.matchers.Put(m)

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	m.reset(len(ix.slots), len(cands))
	for c, s := range cands {
		m.cand[c] = candState{depth: ^uint32(0)} // matches nothing
		if int(s) < len(ix.slots) && ix.slots[s].inUse {
			m.slot[s] = slotMark{stamp: m.stamp, cand: int32(c)}
			m.cand[c] = candState{gen: packGen(&ix.slots[s].gen)}
		}
	}
	defer m.results(out)
	// Blocks are looked up in groups: first every home entry of the group is
	// loaded in a tight loop, so their cache misses overlap, then the group is
	// matched from cache. A group past the last matching block costs only
	// its loads.
	for g := 0; g < len(hashes); g += prefetchGroup {
		group := hashes[g:min(g+prefetchGroup, len(hashes))]
		for _, h := range group {
			m.sink += ix.prefetch(h)
		}
		for k, h := range group {
			if ix.matchBlock(m, h, uint32(g+k)) == 0 {
				return
			}
		}
	}
}

// prefetchGroup is how many blocks Match loads ahead of matching them.
const prefetchGroup = 16

// prefetch loads the home entry of h; the caller keeps the result so the
// load is not optimised away.
func (ix *Index) prefetch(h uint64) uint64 {
	t := &ix.shards[h>>(64-shardBits)]
	if len(t.entries) == 0 {
		return 0
	}
	return t.entries[t.home(h)].hash
}

// results copies the per-candidate counts into out.
func (m *matcher) results(out []Match) {
	for c := range out {
		k := &m.cand[c].counts
		out[c] = Match{Blocks: [NumTiers]uint32{k[TierGPU], k[TierCPU], k[TierDisk]}, Approx: k[TierApprox]}
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
	advanced := 0
	for {
		e := &es[j]
		if e.hash != h || e.tiers == 0 {
			return advanced
		}
		if mk := m.slot[e.slot]; mk.stamp == m.stamp {
			c := &m.cand[mk.cand]
			if valid := e.tiers & genEqual(packGen(&e.gen), c.gen); c.depth == i && valid != 0 {
				c.counts[bits.TrailingZeros8(valid)&(numTiers-1)]++
				c.depth++
				advanced++
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
