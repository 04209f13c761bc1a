package kvstore

import (
	"math/rand/v2"
	"testing"
)

// TestRunFindsEveryStart: run agrees with a scan of the whole table for
// every hash held and for absent ones, in a table crowded enough that runs
// start anywhere from their home position to far past it (so both the
// four-entry window and the probe loop answer), with runs that wrap past
// the end, and with the hash 0, whose entries look like empty positions'
// hashes.
func TestRunFindsEveryStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 50 {
		tb := &table{}
		tb.resize(minTableSize)
		// Some hashes held by several slots; in even rounds homes crowd.
		var held []uint64
		for len(held) < 40 {
			h := rng.Uint64()
			if round%2 == 0 {
				h >>= 12 // homes in the first sixteenth: long displacements
			}
			if round%4 < 2 && rng.IntN(10) == 0 { // half the rounds hold 0, half ask for it absent
				h = 0
			}
			for s := range 1 + rng.IntN(3) {
				if tb.full() {
					tb.grow()
				}
				if pos, found := tb.lookup(h, uint16(s)); !found {
					tb.insertAt(pos, entry{hash: h, slot: uint16(s), tiers: 1})
				}
			}
			held = append(held, h)
		}
		scan := func(h uint64) int {
			first := -1
			for j, e := range tb.entries {
				if e.tiers != 0 && e.hash == h {
					prev := tb.entries[(j+len(tb.entries)-1)%len(tb.entries)]
					if prev.tiers == 0 || prev.hash != h {
						first = j
					}
				}
			}
			return first
		}
		for _, h := range append(held, 0, 1, 1<<40, ^uint64(0)) {
			if got, want := tb.run(h), scan(h); got != want {
				t.Fatalf("round %d: run(%#x) = %d, want %d", round, h, got, want)
			}
		}
	}
}
