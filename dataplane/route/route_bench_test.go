package route

import (
	"math/rand/v2"
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

// simPool starts n simulated engines on loopback and a pool connected to them.
func simPool(b testing.TB, n int) *engine.Pool { return simPoolRanks(b, n, 1) }

// simPoolRanks is simPool with engines of ranks data-parallel ranks.
func simPoolRanks(b testing.TB, n, ranks int) *engine.Pool {
	b.Helper()
	change := make([]func(*sim.Config), n)
	for i := range change {
		change[i] = func(c *sim.Config) { c.DPRanks = ranks }
	}
	return simPoolOf(b, kvstore.New(kvstore.Options{}), change...)
}

// BenchmarkRouteDecision times one kv routing decision for an 8,192-token
// prompt over 64 engines: hash the prompt, match it against every engine,
// score, pick and reserve (and release). The index holds entriesPerEngine
// blocks per engine, and 8 engines hold leading parts of the prompt.
func BenchmarkRouteDecision(b *testing.B) { benchRoute(b, 64, 1) }

// BenchmarkRouteDecisionRanks is BenchmarkRouteDecision over 16 engines of
// 4 data-parallel ranks: the same 64 candidates, (engine, rank) pairs.
func BenchmarkRouteDecisionRanks(b *testing.B) { benchRoute(b, 16, 4) }

func benchRoute(b *testing.B, engines, ranks int) {
	entriesPerEngine := 150_000 // ~10 M (block, engine) entries in all
	if testing.Short() {
		entriesPerEngine = 2_000
	}
	pool := simPoolRanks(b, engines, ranks)
	rng := rand.New(rand.NewPCG(3, 4))
	prompt := make([]uint32, 8192)
	for i := range prompt {
		prompt[i] = uint32(rng.IntN(150000))
	}
	h := pool.Engines()[0].Hasher()
	hs, err := h.Hash(nil, prompt, nil)
	if err != nil {
		b.Fatal(err)
	}
	chain := make([]uint64, 64)
	i := 0
	for _, e := range pool.Engines() {
		for rank := range uint16(ranks) {
			slot, _ := e.RankSlot(rank)
			for done := 0; done < entriesPerEngine; done += len(chain) {
				for j := range chain {
					chain[j] = rng.Uint64()
				}
				if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Hashes: chain}}); err != nil {
					b.Fatal(err)
				}
			}
			if i < 8 {
				if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Hashes: hs[:64*(i+1)]}}); err != nil {
					b.Fatal(err)
				}
			}
			i++
		}
	}
	r := New(pool, PolicyKV, DefaultWeights())
	req := &Request{Model: "kvgate/sim", Tokens: prompt}
	b.ReportMetric(float64(pool.Index().Stats().Entries), "index-entries")
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
