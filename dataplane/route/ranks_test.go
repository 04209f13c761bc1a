package route

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// simRankPool starts n simulated engines of ranks data-parallel ranks each
// (separate schedulers and caches) on loopback, and a pool connected to
// them. The default timing profile runs at speed: the requests of a burst
// are in flight together, as on a real engine.
func simRankPool(t testing.TB, n, ranks int, speed float64) *engine.Pool {
	t.Helper()
	return simEngines(t, kvstore.New(kvstore.Options{}), simConfigs(n, func(c *sim.Config) {
		c.DPRanks, c.Speed, c.LoadInterval = ranks, speed, 5*time.Millisecond
	})...)
}

// sent is one request routed and sent as the gateway sends it: the
// decision's rank in the GENERATE.
type sent struct {
	d *Decision
	s *engine.Stream
}

func send(t *testing.T, r *Router, prompt []uint32) sent {
	t.Helper()
	d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: prompt})
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Engine.Generate(&wire.Generate{Model: []byte("kvgate/sim"), MaxTokens: 2, TopP: 1,
		Flags: wire.GenIgnoreEOS, DPRank: d.WireRank(), Prompt: wire.TokensOf(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	return sent{d, s}
}

// finish follows the stream to its end, as the gateway does (FirstToken,
// Done), and returns the prompt tokens the engine served from its cache.
func (x sent) finish(t *testing.T) uint32 {
	t.Helper()
	defer x.d.Done()
	cached := uint32(0)
	timeout := time.After(time.Minute)
	for {
		select {
		case <-x.s.Ready():
		case <-timeout:
			t.Fatal("no end of stream in a minute")
		}
		for _, ev := range x.s.Take() {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if ev.First {
				x.d.FirstToken()
				cached = ev.Cached
			}
			if ev.Last {
				return cached
			}
		}
	}
}

// TestRanksFindTheirCache is the case: one engine with 4 ranks, 16
// long prompts sent at once (spread over the ranks by their load), then
// each again. Routed as one cache (rank 0's slot, "any rank" in GENERATE),
// 5 of 16 found theirs; routed by (engine, rank), each is sent to the rank
// that holds it, and all 16 do.
func TestRanksFindTheirCache(t *testing.T) {
	const ranks, prompts, promptLen = 4, 16, 4096
	pool := simRankPool(t, 1, ranks, 20)
	e := pool.Engines()[0]
	if e.Ranks() != ranks {
		t.Fatalf("engine has %d ranks, want %d", e.Ranks(), ranks)
	}
	r := New(pool, PolicyKV, DefaultWeights())
	rng := rand.New(rand.NewPCG(7, 8))
	ps := make([][]uint32, prompts)
	for i := range ps {
		ps[i] = make([]uint32, promptLen)
		for j := range ps[i] {
			ps[i][j] = uint32(rng.IntN(150000))
		}
	}
	first := make([]sent, prompts)
	perRank := make([]int, ranks)
	for i, p := range ps {
		first[i] = send(t, r, p)
		perRank[first[i].d.Rank]++
	}
	for i := range first {
		first[i].finish(t)
	}
	for rank, n := range perRank {
		if n == 0 {
			t.Errorf("the burst left rank %d idle: %v", rank, perRank)
		}
	}
	// The second round starts once the engine's KV events of the first
	// are in the index: each prompt is held whole by the rank it was
	// routed to.
	h := e.Hasher()
	for i, p := range ps {
		hs, _ := h.Hash(nil, p, nil)
		slot, _ := e.RankSlot(first[i].d.Rank)
		out := make([]kvstore.Match, 1)
		checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
			if pool.Index().Match(hs, []kvstore.Slot{slot}, out); int(out[0].Blocks[kvstore.TierGPU]) < len(hs) {
				return fmt.Errorf("prompt %d: rank %d holds %d of its %d blocks", i, first[i].d.Rank, out[0].Blocks[kvstore.TierGPU], len(hs))
			}
			return nil
		})
	}
	found := 0
	for i, p := range ps {
		again := send(t, r, p)
		cached := again.finish(t)
		if again.d.Rank != first[i].d.Rank {
			t.Errorf("prompt %d: first on rank %d, again on rank %d", i, first[i].d.Rank, again.d.Rank)
		}
		if int(cached) >= promptLen-16 {
			found++
		}
	}
	if found != prompts {
		t.Fatalf("%d of %d prompts found their cache", found, prompts)
	}
}
