package route

import (
	"math"

	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// disaggPool is one prefill engine (sim-0) and two decode engines.
func disaggPool(t *testing.T) *engine.Pool {
	roles := []wire.EngineRole{wire.RolePrefill, wire.RoleDecode, wire.RoleDecode}
	cfgs := simConfigs(3, func(c *sim.Config) { c.LoadInterval = 0 })
	for i := range cfgs {
		cfgs[i].Rank.Disagg.Role = roles[i]
	}
	return simEngines(t, kvstore.New(kvstore.Options{}), cfgs...)
}

func distinct(n, salt int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i*7919+salt) % 150000
	}
	return p
}

// TestDisaggConditional: with idle decode engines every prompt is served
// aggregated (the hand-off only adds its transfer); once the decode
// engines are busy decoding, a long uncached prompt is split (prefill on
// the prefill engine, reserved there and on the decode engine at once)
// while a short one still is not; without Split nothing is.
func TestDisaggConditional(t *testing.T) {
	pool := disaggPool(t)
	r := New(pool, PolicyKV, DefaultWeights())
	long := &Request{Model: "kvgate/sim", Tokens: distinct(8000, 1), Split: true}
	d, err := r.Route(long)
	if err != nil || d.Prefill != nil || roleOf(d.Engine) != wire.RoleDecode {
		t.Fatalf("idle fleet: %v %+v", err, d)
	}
	held := d.Engine
	d.Done()
	// Busy decode batches on both decode engines.
	var busy []*Decision
	for i := range 8 {
		b, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(32, 100+i), Split: true})
		if err != nil || b.Prefill != nil || roleOf(b.Engine) != wire.RoleDecode {
			t.Fatalf("short request %d: %v %+v", i, err, b)
		}
		b.FirstToken()
		b.Generated(20000)
		busy = append(busy, b)
	}
	// The engine that served the long prompt holds it (as the router
	// guesses until events say otherwise): it serves it again.
	again, err := r.Route(long)
	if err != nil || again.Prefill != nil || again.Engine != held {
		t.Fatalf("busy fleet, held prompt: %v %+v", err, again)
	}
	again.Done()
	d, err = r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(8000, 2), Split: true})
	if err != nil || d.Prefill == nil {
		t.Fatalf("busy fleet, long prompt: %v %+v", err, d)
	}
	if roleOf(d.Prefill.Engine) != wire.RolePrefill || roleOf(d.Engine) != wire.RoleDecode {
		t.Fatalf("split onto %s (prefill) and %s (decode)", d.Prefill.Engine.Addr, d.Engine.Addr)
	}
	if l := r.Inflight(d.Prefill.Engine); l.Requests != 1 || l.PrefillTokens != 8000 {
		t.Fatalf("prefill reservation %+v", l)
	}
	before := r.Inflight(d.Engine)
	short, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(32, 999), Split: true})
	if err != nil || short.Prefill != nil {
		t.Fatalf("busy fleet, short prompt: %v %+v", err, short)
	}
	short.Done()
	noSplit, err := r.Route(&Request{Model: "kvgate/sim", Tokens: long.Tokens})
	if err != nil || noSplit.Prefill != nil || roleOf(noSplit.Engine) == wire.RolePrefill {
		t.Fatalf("without Split: %v %+v", err, noSplit)
	}
	noSplit.Done()
	d.Done() // releases both sides
	if l := r.Inflight(d.Prefill.Engine); l.Requests != 0 || l.PrefillTokens != 0 || l.DecodeTokens != 0 {
		t.Fatalf("prefill side after Done: %+v", l)
	}
	if l := r.Inflight(d.Engine); l.Requests != before.Requests-1 {
		t.Fatalf("decode side after Done: %+v, before %+v", l, before)
	}
	for _, b := range busy {
		b.Done()
	}
}

// TestDisaggCosts: the split against aggregated choice on candidates, in
// the cost model's own terms (no constant threshold): a split must
// happen where the decode engine's batch or its queued prefill would
// hold the prompt's prefill up while a prefill engine is free, and must
// not where the decode engine is free, holds the prefix, or the prefill
// engine is the busier.
func TestDisaggCosts(t *testing.T) {
	w := DefaultWeights()
	const bs, capacity = 16, 1 << 20
	cand := func(queued, decode float64, cachedBlocks uint32) Candidate {
		c := Candidate{BlockSize: bs, QueuedPrefill: queued, ActiveDecode: decode, MaxBatched: 8192, CapacityTokens: capacity}
		c.Match.Blocks[kvstore.TierGPU] = cachedBlocks
		return c
	}
	for _, tc := range []struct {
		name            string
		n               int
		prefill, decode Candidate
		split           bool
	}{
		{"idle decode engine", 8000, cand(0, 0, 0), cand(0, 0, 0), false},
		{"decode engine's queued prefill, idle prefill engine", 8000, cand(0, 0, 0), cand(16000, 0, 0), true},
		{"a short prompt behind a short queue", 64, cand(0, 0, 0), cand(64, 0, 0), false},
		{"decode engine's queued prefill, busier prefill engine", 8000, cand(40000, 0, 0), cand(16000, 0, 0), false},
		{"busy decode batch, long uncached prompt", 8000, cand(0, 0, 0), cand(0, 40000, 0), true},
		{"busy decode batch, short prompt", 32, cand(0, 0, 0), cand(0, 40000, 0), false},
		{"busy decode batch, prefix cached there", 8000, cand(0, 0, 0), cand(0, 40000, 8000/bs-1), false},
	} {
		pc := w.Cost(PolicyKV, &tc.prefill, tc.n)
		split, agg := w.HandoffCost(pc, &tc.decode, tc.n), w.AggregatedCost(&tc.decode, tc.n)
		if got := split < agg; got != tc.split {
			t.Errorf("%s: split %.2f ms, aggregated %.2f ms: split %v, want %v", tc.name, split, agg, got, tc.split)
		}
	}
	// The decode side's queue delays a split only by what is left of it
	// once the KV has arrived: behind a long queue the split is ready when
	// the queue is done, as an aggregated one-token request would be.
	d := cand(16000, 0, 0)
	if split, queued := w.HandoffCost(0, &d, 8000), w.Cost(PolicyKV, &Candidate{BlockSize: bs, QueuedPrefill: 16000, MaxBatched: 8192,
		CapacityTokens: capacity}, 1); split != queued {
		t.Errorf("behind a long queue: split %.2f ms, the queue %.2f ms", split, queued)
	}
	if full := cand(0, capacity-100, 0); !math.IsInf(w.HandoffCost(0, &full, 8000), 1) {
		t.Error("a decode engine whose KV cannot hold the prompt takes a hand-off")
	}
}

// TestDisaggQueuedPrefill: with no decode batch anywhere but prefill
// queued on both decode engines, a long prompt is split onto the idle
// prefill engine (its queue would hold it up aggregated), and so is a
// short one (its first token comes from the idle prefill engine, its
// second once the queue is done, as aggregated); once the queues are
// done, a long prompt is served aggregated.
func TestDisaggQueuedPrefill(t *testing.T) {
	r := New(disaggPool(t), PolicyKV, DefaultWeights())
	var queued []*Decision
	for i := range 4 { // 2 x 12,000 tokens queued on each decode engine, none started
		q, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(12000, 200+i)})
		if err != nil || q.Prefill != nil || roleOf(q.Engine) != wire.RoleDecode {
			t.Fatalf("queued request %d: %v %+v", i, err, q)
		}
		queued = append(queued, q)
	}
	for _, q := range queued {
		if l := r.Inflight(q.Engine); l.DecodeTokens != 0 || l.PrefillTokens != 24000 {
			t.Fatalf("decode engine %s: %+v", q.Engine.Addr, l)
		}
	}
	d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(8000, 3), Split: true})
	if err != nil || d.Prefill == nil || roleOf(d.Prefill.Engine) != wire.RolePrefill {
		t.Fatalf("long prompt behind queued prefill: %v %+v", err, d)
	}
	d.Done()
	short, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(16, 4), Split: true})
	if err != nil || short.Prefill == nil {
		t.Fatalf("short prompt behind queued prefill: %v %+v", err, short)
	}
	short.Done()
	for _, q := range queued {
		q.Done()
	}
	after, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(8000, 5), Split: true})
	if err != nil || after.Prefill != nil || roleOf(after.Engine) != wire.RoleDecode {
		t.Fatalf("long prompt, queues done: %v %+v", err, after)
	}
	after.Done()
}
