package route

import (
	"math/rand/v2"
	"testing"
)

// TestRouteAllocatesOnlyItsDecision: once warm, a kv decision allocates the
// Decision it returns and nothing else (its working memory is pooled).
func TestRouteAllocatesOnlyItsDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	pool := simPool(t, 4)
	r := New(pool, PolicyKV, DefaultWeights())
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]uint32, 2048)
	for i := range prompt {
		prompt[i] = uint32(rng.IntN(150000))
	}
	req := &Request{Model: "kvgate/sim", Tokens: prompt}
	route := func() {
		d, err := r.Route(req)
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
	}
	route()
	if a := testing.AllocsPerRun(50, route); a > 1 {
		t.Fatalf("%.1f allocations per decision, want 1 (the Decision)", a)
	}
}

// TestQueueFull: with MaxInflight set, engines at the limit are skipped and
// a request finds ErrQueueFull when every engine is; a finished request
// makes room again.
func TestQueueFull(t *testing.T) {
	pool := simPool(t, 2)
	w := DefaultWeights()
	w.MaxInflight = 2
	r := New(pool, PolicyKV, w)
	req := &Request{Model: "kvgate/sim", Tokens: make([]uint32, 64)}
	var ds []*Decision
	for range 4 {
		d, err := r.Route(req)
		if err != nil {
			t.Fatalf("request %d: %v", len(ds), err)
		}
		ds = append(ds, d)
	}
	if _, err := r.Route(req); err != ErrQueueFull {
		t.Fatalf("fifth request: %v, want ErrQueueFull", err)
	}
	ds[0].Done()
	d, err := r.Route(req)
	if err != nil || d.Engine != ds[0].Engine {
		t.Fatalf("after one finished: %v on %v, want %v", err, d, ds[0].Engine.Addr)
	}
}

// TestExcludeOnReroute: a re-route never picks an engine the request
// already failed on while another serves the model, whatever the policy,
// and falls back to the excluded ones when none is left.
func TestExcludeOnReroute(t *testing.T) {
	pool := simPool(t, 2)
	es := pool.Engines()
	for _, p := range []Policy{PolicyKV, PolicyRoundRobin, PolicyLeastLoad, PolicySession} {
		t.Run(string(p), func(t *testing.T) {
			r := New(pool, p, DefaultWeights())
			for i := range 20 {
				tokens := make([]uint32, 256)
				tokens[0] = uint32(i)
				d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: tokens, Session: "s", Exclude: es[:1]})
				if err != nil {
					t.Fatal(err)
				}
				d.Done()
				if d.Engine == es[0] {
					t.Fatalf("request %d went to the excluded engine", i)
				}
			}
			d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: make([]uint32, 256), Exclude: es})
			if err != nil {
				t.Fatalf("every engine excluded: %v, want one of them", err)
			}
			d.Done()
		})
	}
}
