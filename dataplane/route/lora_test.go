package route

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// TestAdapterCostAdds checks that the kv estimate carries the adapter's
// wait and nothing else changes.
func TestAdapterCostAdds(t *testing.T) {
	w := DefaultWeights()
	c := Candidate{BlockSize: 16, QueuedPrefill: 1000, MaxBatched: 8192}
	base := w.Cost(PolicyKV, &c, 512)
	c.AdapterMs = 42
	if got := w.Cost(PolicyKV, &c, 512); math.Abs(got-base-42) > 1e-9 {
		t.Fatalf("%v, want %v + 42", got, base)
	}
}

// TestAdapterMs: the base model and an engine without a view cost
// nothing; a missing adapter one load at the weights' default, and
// nothing to a blind router.
func TestAdapterMs(t *testing.T) {
	w := DefaultAdapterWeights()
	var v engine.AdapterView
	v.Apply(&wire.Adapters{Change: wire.AdaptersResident, Slots: 8}, 0)
	if w.AdapterMs(&v, 0, time.Second) != 0 || w.AdapterMs(nil, 3, time.Second) != 0 || w.AdapterMs(&v, 3, time.Second) != w.LoadMs {
		t.Fatal("adapter costs")
	}
	if w.Blind = true; w.AdapterMs(&v, 3, time.Second) != 0 {
		t.Fatal("a blind router counted a load")
	}
}

// TestRouteByResidency: two simulated engines with one adapter slot each.
// Adapter a goes to either; once it is loaded there, a again goes to that
// engine (its load is paid), and b goes to the other one rather than evict
// a, which was used a moment ago.
func TestRouteByResidency(t *testing.T) {
	pool := simEngines(t, kvstore.New(kvstore.Options{}), simConfigs(2, func(c *sim.Config) {
		c.Speed, c.LoadInterval = 100, 5*time.Millisecond
		c.LoRAs, c.MaxLoRAs = []wire.LoRA{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}}, 1
	})...)
	for _, e := range pool.Engines() {
		checkFor(t, 10*time.Second, time.Millisecond, func() error {
			if e.Adapters(0) == nil {
				return fmt.Errorf("no residency from %s", e.Addr)
			}
			return nil
		})
	}
	r := New(pool, PolicyKV, DefaultWeights())
	run := func(model string) *engine.Engine {
		t.Helper()
		d, err := r.Route(&Request{Model: model, Tokens: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}})
		if err != nil {
			t.Fatal(err)
		}
		_, lora, _ := d.Engine.Resolve(model)
		s, err := d.Engine.Generate(&wire.Generate{Model: []byte("kvgate/sim"), LoRAID: lora, MaxTokens: 2, TopP: 1,
			Flags: wire.GenIgnoreEOS, DPRank: d.WireRank(), Prompt: wire.TokensOf([]uint32{1, 2, 3})})
		if err != nil {
			t.Fatal(err)
		}
		sent{d, s}.finish(t)
		return d.Engine
	}
	first := run("a")
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		if !first.Adapters(0).Resident(1) {
			return fmt.Errorf("a's load not reported by %s", first.Addr)
		}
		return nil
	})
	if again := run("a"); again != first {
		t.Fatalf("a went to %s, not to %s where it is resident", again.Addr, first.Addr)
	}
	if other := run("b"); other == first {
		t.Fatalf("b evicted a, used a moment ago, on %s; the other engine had a free slot", first.Addr)
	}
	if st := first.Adapters(0).Stats(); st.Loads != 1 || st.Evictions != 0 {
		t.Fatalf("%s: %+v", first.Addr, st)
	}
}
