package admin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// TestLoRAMetrics: an engine with one adapter slot runs sql, then chat;
// the metrics show chat resident, one load of each, one eviction and the
// reported load time.
func TestLoRAMetrics(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Rank.Profile, cfg.Speed = sim.ZeroProfile, 10
	cfg.LoRAs, cfg.MaxLoRAs, cfg.LoRALoadTime = []wire.LoRA{{ID: 3, Name: "sql"}, {ID: 4, Name: "chat"}}, 1, 20*time.Millisecond
	pool := simEnginePool(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := pool.Engines()[0]
	for _, id := range []uint32{3, 4} {
		st, err := e.Generate(&wire.Generate{Model: []byte("kvgate/sim"), LoRAID: id, MaxTokens: 1, TopP: 1, DPRank: wire.AnyRank,
			Flags: wire.GenIgnoreEOS, Prompt: wire.TokensOf([]uint32{1, 2, 3})})
		if err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			select {
			case <-st.Ready():
			case <-ctx.Done():
				t.Fatal("no end of stream")
			}
			for _, ev := range st.Take() {
				if ev.Err != nil {
					t.Fatal(ev.Err)
				}
				done = done || ev.Last
			}
		}
	}
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		if v := e.Adapters(0); v == nil || v.Stats().Loads != 2 {
			return errors.New("the two loads are not reported")
		}
		return nil
	})
	reg := prometheus.NewPedanticRegistry()
	RegisterEngines(reg, pool, route.New(pool, route.PolicyKV, route.DefaultWeights()), nil)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "adapter" {
					key += " " + l.GetValue()
				}
			}
			switch {
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			}
		}
	}
	for series, want := range map[string]float64{
		"kvgate_lora_slots": 1, "kvgate_lora_resident chat": 1, "kvgate_lora_loads_total sql": 1, "kvgate_lora_loads_total chat": 1,
		"kvgate_lora_evictions_total": 1, "kvgate_lora_load_seconds": 0.02,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if _, ok := got["kvgate_lora_resident sql"]; ok {
		t.Error("sql, evicted, is still resident")
	}
}
