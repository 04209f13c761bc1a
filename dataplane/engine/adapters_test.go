package engine

import (
	"math"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

func TestAdapterViewCost(t *testing.T) {
	cost := func(v *AdapterView, id uint32, now time.Duration) float64 {
		return v.CostMs(id, now, 50, 10*time.Second)
	}
	var v AdapterView
	if c := cost(&v, 3, 0); c != 0 {
		t.Fatalf("an engine that reports no residency costs %v", c)
	}
	v.Apply(&wire.Adapters{Change: wire.AdaptersResident, Slots: 2, LoRAs: []wire.LoRA{{ID: 1}}}, 0)
	sec := time.Second
	for _, c := range []struct {
		name string
		id   uint32
		now  time.Duration
		want float64
	}{
		{"base model", 0, sec, 0},
		{"resident", 1, sec, 0},
		{"free slot: one load, default time", 2, sec, 50},
	} {
		if got := cost(&v, c.id, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	v.Apply(&wire.Adapters{Change: wire.AdaptersLoaded, Slots: 2, LoadNanos: 20e6, LoRAs: []wire.LoRA{{ID: 2}}}, 2*sec)
	// Both slots taken; adapter 1 idle since 0, adapter 2 loaded at 2 s.
	v.Sent(1, 5*sec)
	// Loading 3 evicts adapter 2 (idle since 2 s): a 20 ms load (measured
	// now) plus 20 ms x exp(-1 s / 10 s).
	want := 20 + 20*math.Exp(-0.1)
	if got := cost(&v, 3, 3*sec); math.Abs(got-want) > 1e-9 {
		t.Fatalf("full: %v, want %v", got, want)
	}
	v.Sent(3, 3*sec)
	if got := cost(&v, 3, 3*sec+5*time.Millisecond); math.Abs(got-15) > 1e-9 {
		t.Fatalf("load under way: %v, want the 15 ms left", got)
	}
	v.Apply(&wire.Adapters{Change: wire.AdaptersEvicted, Slots: 2, LoRAs: []wire.LoRA{{ID: 2}}}, 3*sec)
	v.Apply(&wire.Adapters{Change: wire.AdaptersLoaded, Slots: 2, LoadNanos: 40e6, LoRAs: []wire.LoRA{{ID: 3}}}, 3*sec)
	st := v.Stats()
	if !v.Resident(3) || v.Resident(2) || st.Loads != 2 || st.Evictions != 1 || st.MeanLoad != 30*time.Millisecond {
		t.Fatalf("stats %+v", st)
	}
}

// TestAdaptersFromEngine: the pool's HELLO says it reads ADAPTERS; each
// rank's frames land in that rank's view, and a new connection forgets
// what the last one said.
func TestAdaptersFromEngine(t *testing.T) {
	hs := ttHandshake("e")
	hs.DPRanks = 2
	hs.Features |= wire.FeatureAdapters
	eng := ttStartEngine(t, hs, nil)
	p, _ := ttPool(t, nil, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	if e.Adapters(0) != nil {
		t.Fatal("a view before any ADAPTERS frame")
	}
	c.send(t, 0, &wire.Adapters{DPRank: 1, Change: wire.AdaptersResident, Slots: 4, LoRAs: []wire.LoRA{{ID: 7, Name: "x"}}})
	c.send(t, 0, &wire.Adapters{DPRank: 1, Change: wire.AdaptersLoaded, Slots: 4, LoadNanos: 30e6, LoRAs: []wire.LoRA{{ID: 8, Name: "y"}}})
	ttWaitFor(t, "rank 1's load", func() bool { v := e.Adapters(1); return v != nil && v.Resident(8) })
	st := e.Adapters(1).Stats()
	if !st.Known || st.Slots != 4 || len(st.Resident) != 2 || st.Loads != 1 || st.MeanLoad != 30*time.Millisecond {
		t.Fatalf("rank 1: %+v", st)
	}
	if v := e.Adapters(0); v == nil || v.Stats().Known {
		t.Fatalf("rank 0 holds rank 1's report: %+v", v)
	}
	eng.stop()
	ttWaitFor(t, "the engine down", func() bool { return !e.Ready() })
	eng.restart(t)
	eng.accept(t)
	ttReady(t, e)
	if e.Adapters(1) != nil {
		t.Fatal("the old connection's residency survived a reconnect")
	}
}
