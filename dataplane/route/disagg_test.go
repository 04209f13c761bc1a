package route

import (
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
