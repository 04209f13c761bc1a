//go:build invariants

package kvstore

import "fmt"

// invariants turns on expensive self-checks (make test builds with the tag).
const invariants = true

// check verifies the Robin Hood order of a shard: every entry is reachable
// from its home, runs are sorted by home, each hash's entries are adjacent,
// and the used count is right. It panics on the first violation.
func (t *table) check() {
	n := len(t.entries)
	used := 0
	last := map[uint64]int{}
	start := 0 // walk from an empty position so no run wraps mid-walk
	for start < n && t.entries[start].tiers != 0 {
		start++
	}
	for k := range n {
		j := (start + k) % n
		e := &t.entries[j]
		if e.tiers == 0 {
			continue
		}
		used++
		prev := (j - 1 + n) % n
		if d := t.dist(j); d > 0 && (t.entries[prev].tiers == 0 || d > t.dist(prev)+1) {
			panic(fmt.Sprintf("kvstore: entry %d (dist %d) breaks Robin Hood order", j, d))
		}
		if p, ok := last[e.hash]; ok && p != prev {
			panic(fmt.Sprintf("kvstore: entries of hash %#x at %d and %d are not adjacent", e.hash, p, j))
		}
		last[e.hash] = j
		if t.find(e.hash, e.slot) != j {
			panic(fmt.Sprintf("kvstore: entry %d not found from its home", j))
		}
	}
	if used != t.used {
		panic(fmt.Sprintf("kvstore: used %d, counted %d", t.used, used))
	}
}
