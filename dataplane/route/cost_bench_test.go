package route

import (
	"testing"

	"github.com/kvgate/kvgate/kvstore"
)

// BenchmarkCost scores one candidate, as a decision does for every engine:
// a GPU-only match (the common case) and one with CPU and disk blocks.
func BenchmarkCost(b *testing.B) {
	w := DefaultWeights()
	for _, bc := range []struct {
		name  string
		match kvstore.Match
	}{
		{"gpu", kvstore.Match{Blocks: [kvstore.NumTiers]uint32{200, 0, 0}}},
		{"tiers", kvstore.Match{Blocks: [kvstore.NumTiers]uint32{100, 60, 40}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := Candidate{Match: bc.match, BlockSize: 16, QueuedPrefill: 4096, ActiveDecode: 20000, MaxBatched: 8192, CapacityTokens: 1 << 20}
			b.ReportAllocs()
			sum := 0.0
			for b.Loop() {
				sum += w.Cost(PolicyKV, &c, 8192)
			}
			if sum <= 0 {
				b.Fatal(sum)
			}
		})
	}
}
