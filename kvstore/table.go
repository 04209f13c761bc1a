package kvstore

import "math/bits"

// entry is one resident (block, engine slot) pair: 16 bytes and no pointers,
// so the garbage collector never scans the index, however large.
//
//	| hash u64 | slot u16 | tiers u8 | pad u8 | gen [4]u8 |
//
// Bit t of tiers says the block is held in tier t (TierApprox is bit 3); the
// bit counts only while gen[t] equals the slot's current generation for t.
// Bumping a slot's generation therefore clears a whole tier, or a whole
// engine, in O(1); the sweeper removes the stale entries later. Whoever
// writes an entry drops its stale bits and copies all four of the slot's
// generations, so gen equals the slot's word until one of its tiers is
// cleared, and Match tests that with one compare.
type entry struct {
	hash  uint64
	slot  uint16
	tiers uint8
	_     uint8
	gen   [numTiers]uint8
}

const entrySize = 16

// table is one shard of the index: an open-addressing multimap from block
// hash to entries with Robin Hood ordering. Every probe run is sorted by home
// position, and the entries of one block hash sit next to each other, so a
// lookup skips the few entries displaced from earlier homes, reads the
// block's entries (usually one cache line), and stops at the first entry of
// another hash. Deletion shifts later entries back (no tombstones).
//
// Sizes are not powers of two: the home position is the high half of
// hash*len, so the table grows by 1.5x and stays between 50% and 75% full.
type table struct {
	entries []entry
	used    int
	// keep, when set, says whether an entry still holds a valid tier; growth
	// drops the entries it refuses instead of copying them.
	keep func(*entry) bool
}

const (
	minTableSize = 64
	maxLoadNum   = 3 // grow above 3/4 full
	maxLoadDen   = 4
)

// home returns the first probe position of h. The top shardBits of h chose
// the shard, so the bits below them choose the position.
func (t *table) home(h uint64) int {
	hi, _ := bits.Mul64(h<<shardBits, uint64(len(t.entries)))
	return int(hi)
}

// dist is how far the entry at j sits from its home.
func (t *table) dist(j int) int {
	d := j - t.home(t.entries[j].hash)
	if d < 0 {
		d += len(t.entries)
	}
	return d
}

// run returns the position of the first entry of hash h, or -1 when the
// table holds none. The entries of h are at run, run+1, ... (cyclically)
// while their hash is h.
//
// It first compares the nearRun entries from h's home position all at once:
// a hash the table holds almost always starts among them (97% of hashes in
// a 10 M-entry index at its 62% load start within three of home), and how
// far it was displaced is data the branch predictor cannot guess for a
// prompt it has not seen (a wrong guess costs more than the compares). Only
// when none of them is h does it probe one entry at a time.
func (t *table) run(h uint64) int {
	n := len(t.entries)
	if n == 0 {
		return -1
	}
	j := t.home(h)
	if j+nearRun <= n && h != 0 { // an empty position's hash is 0
		w := (*[nearRun]entry)(t.entries[j : j+nearRun])
		m := b2u(w[0].hash == h) | b2u(w[1].hash == h)<<1 | b2u(w[2].hash == h)<<2 | b2u(w[3].hash == h)<<3
		if m != 0 {
			return j + bits.TrailingZeros(m)
		}
	}
	for d := 0; ; d++ {
		e := &t.entries[j]
		if e.tiers == 0 {
			return -1
		}
		if e.hash == h {
			return j
		}
		if t.dist(j) < d {
			return -1 // entries from here on start later than h would
		}
		if j++; j == n {
			j = 0
		}
	}
}

// nearRun is how many entries from its home run compares at once; the
// compares are written out, four of them.
const nearRun = 4

// b2u is 1 for true and 0 for false, without a branch.
func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
}

// find returns the position of (h, slot), or -1.
func (t *table) find(h uint64, slot uint16) int {
	if len(t.entries) == 0 {
		return -1
	}
	if pos, found := t.lookup(h, slot); found {
		return pos
	}
	return -1
}

// lookup returns the position of (h, slot) and true, or else the position
// where it belongs (after h's other entries, or where Robin Hood order puts
// a new hash) and false. The table must not be empty.
func (t *table) lookup(h uint64, slot uint16) (int, bool) {
	n := len(t.entries)
	j := t.home(h)
	for d := 0; ; d++ {
		e := &t.entries[j]
		if e.tiers == 0 {
			return j, false
		}
		if e.hash == h {
			for {
				if e.slot == slot {
					return j, true
				}
				if j++; j == n {
					j = 0
				}
				if e = &t.entries[j]; e.tiers == 0 || e.hash != h {
					return j, false
				}
			}
		}
		if t.dist(j) < d {
			return j, false
		}
		if j++; j == n {
			j = 0
		}
	}
}

// full reports whether one more entry would pass the maximum load.
func (t *table) full() bool { return (t.used+1)*maxLoadDen > len(t.entries)*maxLoadNum }

func (t *table) grow() { t.resize(max(minTableSize, len(t.entries)*3/2)) }

// insertAt stores e at pos, which lookup returned for it, shifting the rest
// of the run one position on.
func (t *table) insertAt(pos int, e entry) {
	t.used++
	n := len(t.entries)
	for j := pos; ; {
		cur := &t.entries[j]
		if cur.tiers == 0 {
			*cur = e
			return
		}
		e, *cur = *cur, e
		if j++; j == n {
			j = 0
		}
	}
}

// remove deletes the entry at i, shifting the rest of its run back while
// those entries are away from home.
func (t *table) remove(i int) {
	n := len(t.entries)
	t.used--
	for {
		j := i + 1
		if j == n {
			j = 0
		}
		if t.entries[j].tiers == 0 || t.dist(j) == 0 {
			t.entries[i] = entry{}
			return
		}
		t.entries[i] = t.entries[j]
		i = j
	}
}

// resize rehashes into n positions, dropping entries keep refuses.
func (t *table) resize(n int) {
	keep := t.keep
	old := t.entries
	t.entries = make([]entry, n)
	t.used = 0
	for i := range old {
		e := &old[i]
		if e.tiers != 0 && (keep == nil || keep(e)) {
			pos, _ := t.lookup(e.hash, e.slot)
			t.insertAt(pos, *e)
		}
	}
}
