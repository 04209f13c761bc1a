package route

import (
	"math"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

func TestAdapterViewCost(t *testing.T) {
	w := AdapterWeights{LoadMs: 50, HeatWindow: 10 * time.Second}
	var v AdapterView
	if c := v.CostMs(3, 0, &w); c != 0 {
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
		if got := v.CostMs(c.id, c.now, &w); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	v.Apply(&wire.Adapters{Change: wire.AdaptersLoaded, Slots: 2, LoadNanos: 20e6, LoRAs: []wire.LoRA{{ID: 2}}}, 2*sec)
	// Both slots taken; adapter 1 idle since 0, adapter 2 loaded at 2 s.
	v.Sent(1, 5*sec)
	// Loading 3 evicts adapter 2 (idle since 2 s): a 20 ms load (measured
	// now) plus 20 ms x exp(-1 s / 10 s).
	want := 20 + 20*math.Exp(-0.1)
	if got := v.CostMs(3, 3*sec, &w); math.Abs(got-want) > 1e-9 {
		t.Fatalf("full: %v, want %v", got, want)
	}
	v.Sent(3, 3*sec)
	if got := v.CostMs(3, 3*sec+5*time.Millisecond, &w); math.Abs(got-15) > 1e-9 {
		t.Fatalf("load under way: %v, want the 15 ms left", got)
	}
	v.Apply(&wire.Adapters{Change: wire.AdaptersEvicted, Slots: 2, LoRAs: []wire.LoRA{{ID: 2}}}, 3*sec)
	v.Apply(&wire.Adapters{Change: wire.AdaptersLoaded, Slots: 2, LoadNanos: 40e6, LoRAs: []wire.LoRA{{ID: 3}}}, 3*sec)
	st := v.Stats()
	if !v.Resident(3) || v.Resident(2) || st.Loads != 2 || st.Evictions != 1 || st.MeanLoad != 30*time.Millisecond {
		t.Fatalf("stats %+v", st)
	}
}

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
