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

// simPoolOf starts one simulated engine per configuration change (applied
// to simPool's configuration) and a pool on index connected to them, in
// that order.
func simPoolOf(t testing.TB, index *kvstore.Index, change ...func(*sim.Config)) *engine.Pool {
	t.Helper()
	cfgs := make([]sim.Config, len(change))
	for i, ch := range change {
		cfgs[i] = sim.DefaultConfig()
		cfgs[i].Rank.Profile, cfgs[i].LoadInterval, cfgs[i].Rank.GPUBlocks = sim.ZeroProfile, 0, 1<<18
		ch(&cfgs[i])
	}
	return simEngines(t, index, cfgs...)
}

func noEvents(c *sim.Config)   { c.NoKVEvents = true }
func withEvents(c *sim.Config) { c.NoKVEvents = false }
func randomPrompt(rng *rand.Rand, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(rng.IntN(150000))
	}
	return p
}

// route routes req and releases it at once, as sequential requests that
// finish before the next one starts.
func route(t *testing.T, r *Router, tokens []uint32) *Decision {
	t.Helper()
	d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	d.Done()
	return d
}

func slotOf(t *testing.T, e *engine.Engine) kvstore.Slot {
	t.Helper()
	s, ok := e.Slot()
	if !ok {
		t.Fatalf("%s has no slot", e.Addr)
	}
	return s
}

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed.
func checkFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// TestKVApproxCreditWithoutEvents: under kv, engines that publish no KV
// events get prefix credit for what they were sent: a repeated prompt
// matches in full as approximate blocks on the engine that had it, and
// sticks there; a new prompt gets none; nothing is recorded for the
// engine that was not chosen.
func TestKVApproxCreditWithoutEvents(t *testing.T) {
	index := kvstore.New(kvstore.Options{})
	pool := simPoolOf(t, index, noEvents, noEvents)
	r := New(pool, PolicyKV, DefaultWeights())
	rng := rand.New(rand.NewPCG(5, 6))
	p := randomPrompt(rng, 2048) // 128 blocks of 16
	first := route(t, r, p)
	if first.Match.Depth() != 0 {
		t.Fatalf("a prompt never sent matched %+v", first.Match)
	}
	for i := range 20 {
		d := route(t, r, p)
		if d.Engine != first.Engine {
			t.Fatalf("repeat %d went to %s, the prompt is on %s", i, d.Engine.Addr, first.Engine.Addr)
		}
		if d.Match.Approx != 128 || d.Match.Blocks != [kvstore.NumTiers]uint32{} || d.PredictedCached != 2048 {
			t.Fatalf("repeat %d matched %+v (predicted %d), want 128 approximate blocks", i, d.Match, d.PredictedCached)
		}
	}
	// The guess is weighed at ApproxBlockCost, but reserved as prefill.
	d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: p})
	if err != nil {
		t.Fatal(err)
	}
	if l := r.Inflight(d.Engine); l.PrefillTokens != 2048 {
		t.Fatalf("a guessed hit reserved %d prefill tokens, want the prompt's 2048", l.PrefillTokens)
	}
	d.Done()
	if d := route(t, r, randomPrompt(rng, 2048)); d.Match.Depth() != 0 {
		t.Fatalf("a new prompt matched %+v", d.Match)
	}
	other := pool.Engines()[0]
	if other == first.Engine {
		other = pool.Engines()[1]
	}
	for _, es := range index.Stats().Engines {
		if es.Precise {
			t.Fatalf("%s is precise: it sent no events", es.Engine)
		}
		if es.Engine == first.Engine.Addr && es.Blocks[kvstore.TierApprox] < 128 {
			t.Fatalf("%s holds %d approximate blocks, want at least the prompt's 128", es.Engine, es.Blocks[kvstore.TierApprox])
		}
	}
	m := make([]kvstore.Match, 1)
	hs, _ := other.Hasher().Hash(nil, p, nil)
	index.Match(hs, []kvstore.Slot{slotOf(t, other)}, m)
	if m[0].Depth() != 0 {
		t.Fatalf("the engine not chosen holds %+v of the prompt", m[0])
	}
}

// TestKVApproxReplacedByEvents: an engine that publishes events is routed
// on guesses only until its first event; from then on it gets precise
// credit only (the guesses are gone, none are recorded), and a new prompt
// routed twice to engines that have sent events gets no credit.
func TestKVApproxReplacedByEvents(t *testing.T) {
	index := kvstore.New(kvstore.Options{})
	pool := simPoolOf(t, index, withEvents, withEvents)
	r := New(pool, PolicyKV, DefaultWeights())
	rng := rand.New(rand.NewPCG(7, 8))
	p := randomPrompt(rng, 2048)
	first := route(t, r, p)
	if d := route(t, r, p); d.Engine != first.Engine || d.Match.Approx != 128 {
		t.Fatalf("before any event: %s matched %+v, want the 128 approximate blocks on %s", d.Engine.Addr, d.Match, first.Engine.Addr)
	}
	// Each engine serves a request for real and publishes its blocks.
	generate(t, first.Engine, p)
	for _, e := range pool.Engines() {
		if e != first.Engine {
			generate(t, e, randomPrompt(rng, 256))
		}
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		for _, e := range pool.Engines() {
			if !index.Precise(slotOf(t, e)) {
				return fmt.Errorf("%s: no KV event applied yet", e.Addr)
			}
		}
		return nil
	})
	for i := range 5 {
		d := route(t, r, p)
		if d.Engine != first.Engine || d.Match.Approx != 0 || d.Match.Blocks[kvstore.TierGPU] != 128 {
			t.Fatalf("after events, repeat %d: %s matched %+v, want 128 GPU blocks on %s and nothing approximate",
				i, d.Engine.Addr, d.Match, first.Engine.Addr)
		}
	}
	q := randomPrompt(rng, 2048)
	route(t, r, q)
	if d := route(t, r, q); d.Match.Depth() != 0 {
		t.Fatalf("a prompt only routed, never served, matched %+v on an engine with events", d.Match)
	}
	for _, es := range index.Stats().Engines {
		if es.Blocks[kvstore.TierApprox] != 0 {
			t.Fatalf("%s holds %d approximate blocks after its events", es.Engine, es.Blocks[kvstore.TierApprox])
		}
	}
}

// generate runs a request on e to its end.
func generate(t *testing.T, e *engine.Engine, prompt []uint32) {
	t.Helper()
	s, err := e.Generate(&wire.Generate{Model: []byte("kvgate/sim"), MaxTokens: 2, TopP: 1, Prompt: wire.TokensOf(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case <-s.Ready():
		case <-timeout:
			t.Fatalf("%s: no end of the request", e.Addr)
		}
		for _, ev := range s.Take() {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if ev.Last {
				return
			}
		}
	}
}

// TestKVApproxBounds: approximate entries leave after the TTL, and past
// the engine's capacity the least recently used leave first.
func TestKVApproxBounds(t *testing.T) {
	t.Run("ttl", func(t *testing.T) {
		clock := &fakeClock{now: time.Unix(1000, 0)}
		index := kvstore.New(kvstore.Options{ApproxTTL: time.Minute, Now: clock.Now})
		pool := simPoolOf(t, index, noEvents)
		r := New(pool, PolicyKV, DefaultWeights())
		rng := rand.New(rand.NewPCG(9, 10))
		p, q := randomPrompt(rng, 512), randomPrompt(rng, 512)
		route(t, r, p)
		clock.advance(50 * time.Second)
		route(t, r, q)
		clock.advance(20 * time.Second) // p last used 70 s ago, q 20 s ago
		if n := index.ExpireApprox(); n != 32 {
			t.Fatalf("%d blocks expired, want p's 32", n)
		}
		if d := route(t, r, p); d.Match.Depth() != 0 {
			t.Fatalf("p matched %+v after its TTL", d.Match)
		}
		if d := route(t, r, q); d.Match.Approx != 32 {
			t.Fatalf("q matched %+v within its TTL", d.Match)
		}
	})
	t.Run("capacity", func(t *testing.T) {
		index := kvstore.New(kvstore.Options{})
		pool := simPoolOf(t, index, func(c *sim.Config) { noEvents(c); c.Rank.GPUBlocks = 128 })
		r := New(pool, PolicyKV, DefaultWeights())
		rng := rand.New(rand.NewPCG(11, 12))
		a, b, c := randomPrompt(rng, 1024), randomPrompt(rng, 1024), randomPrompt(rng, 1024) // 64 blocks each
		route(t, r, a)
		route(t, r, b)
		route(t, r, c) // a, the least recently used, makes room
		if st := index.Stats().Engines[0]; st.Blocks[kvstore.TierApprox] != 128 {
			t.Fatalf("%d approximate blocks, want the capacity, 128", st.Blocks[kvstore.TierApprox])
		}
		for _, tc := range []struct {
			name   string
			prompt []uint32
			want   uint32
		}{{"b", b, 64}, {"c", c, 64}, {"a", a, 0}} {
			if d := route(t, r, tc.prompt); d.Match.Approx != tc.want {
				t.Fatalf("%s matched %+v, want %d approximate blocks", tc.name, d.Match, tc.want)
			}
		}
	})
}

// TestRouteApproxAllocatesOnlyItsDecision: recording approximate entries
// adds no allocation to a kv decision once the engine's entries have
// their working size.
func TestRouteApproxAllocatesOnlyItsDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	index := kvstore.New(kvstore.Options{})
	pool := simPoolOf(t, index, noEvents, noEvents, noEvents, noEvents)
	r := New(pool, PolicyKV, DefaultWeights())
	req := &Request{Model: "kvgate/sim", Tokens: randomPrompt(rand.New(rand.NewPCG(1, 2)), 2048)}
	decide := func() {
		d, err := r.Route(req)
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
	}
	for range 20 {
		decide()
	}
	if a := testing.AllocsPerRun(50, decide); a > 1 {
		t.Fatalf("%.1f allocations per decision, want 1 (the Decision)", a)
	}
	if st := index.Stats(); st.Entries == 0 {
		t.Fatal("nothing was recorded")
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }
