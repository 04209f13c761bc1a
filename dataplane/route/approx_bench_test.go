package route

import (
	"math/rand/v2"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

// BenchmarkRouteDecisionApprox is BenchmarkRouteDecision over 64 engines
// that publish no KV events: the index holds approximate entries only
// (entriesPerEngine blocks of each engine's past prompts, 8 engines with
// leading parts of the prompt), and every decision records the prompt's
// 512 blocks on the chosen engine under the index's write lock.
func BenchmarkRouteDecisionApprox(b *testing.B) {
	entriesPerEngine := 20_000
	if testing.Short() {
		entriesPerEngine = 2_000
	}
	change := make([]func(*sim.Config), 64)
	for i := range change {
		change[i] = noEvents
	}
	index := kvstore.New(kvstore.Options{})
	pool := simPoolOf(b, index, change...)
	rng := rand.New(rand.NewPCG(3, 4))
	prompt := randomPrompt(rng, 8192)
	hs, err := pool.Engines()[0].Hasher().Hash(nil, prompt, nil)
	if err != nil {
		b.Fatal(err)
	}
	chain := make([]uint64, 64)
	for i, e := range pool.Engines() {
		slot, _ := e.Slot()
		for done := 0; done < entriesPerEngine; done += len(chain) {
			for j := range chain {
				chain[j] = rng.Uint64()
			}
			if err := index.RecordApprox(slot, chain); err != nil {
				b.Fatal(err)
			}
		}
		if i < 8 {
			if err := index.RecordApprox(slot, hs[:64*(i+1)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	r := New(pool, PolicyKV, DefaultWeights())
	req := &Request{Model: "kvgate/sim", Tokens: prompt}
	// Warm up: the chosen engine's LRU queue grows to its working size (it
	// is compacted in place once it holds twice the live records).
	for range 200 {
		d, err := r.Route(req)
		if err != nil {
			b.Fatal(err)
		}
		d.Done()
	}
	b.ReportMetric(float64(index.Stats().Entries), "index-entries")
	b.ResetTimer()
	b.ReportAllocs()
	for b.Loop() {
		d, err := r.Route(req)
		if err != nil {
			b.Fatal(err)
		}
		d.Done()
	}
}
