package kvstore

import (
	"math"
	"testing"
)

// TestEngineDigests: two indexes with the same blocks under the same engine
// ids compare as 1 whatever the slot numbering; a missing engine or missing
// blocks lower the similarity in proportion.
func TestEngineDigests(t *testing.T) {
	build := func(order []string, skip map[string]int) *Index {
		ix := New(Options{})
		for _, id := range order {
			slots, err := ix.AddEngine(EngineConfig{ID: id, Capacity: [NumTiers]uint64{1 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			n := 1000 - skip[id]
			hs := make([]uint64, 0, n)
			for i := range n {
				hs = append(hs, uint64(len(id))<<32|uint64(i)*2654435761)
			}
			if err := ix.Apply(slots[0], []Event{{Kind: Stored, Tier: TierGPU, Hashes: hs}}); err != nil {
				t.Fatal(err)
			}
		}
		return ix
	}
	a := build([]string{"e1", "e22", "e333"}, nil)
	b := build([]string{"e333", "e1", "e22"}, nil)
	da, db := a.AppendEngineDigests(nil), b.AppendEngineDigests(nil)
	if s := EngineDigestsSimilarity(da, db); s != 1 {
		t.Fatalf("same blocks, other slot order: similarity %v", s)
	}
	c := build([]string{"e1", "e22"}, nil)
	if s := EngineDigestsSimilarity(da, c.AppendEngineDigests(nil)); math.Abs(s-2.0/3) > 1e-9 {
		t.Fatalf("one engine of three missing: similarity %v, want 2/3", s)
	}
	d := build([]string{"e1", "e22", "e333"}, map[string]int{"e1": 1})
	if s := EngineDigestsSimilarity(da, d.AppendEngineDigests(nil)); s >= 1 || s < 0.9 {
		t.Fatalf("one block missing: similarity %v", s)
	}
	if s := EngineDigestsSimilarity(da, []byte{1}); s != 0 {
		t.Fatalf("malformed: %v", s)
	}
}
