package cluster

import (
	"testing"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/workload"
)

// TestLoRAResidency: with adapter slots modelled, every request completes
// under every policy; kv that knows residency loads adapters far less often
// than kv that does not and than round-robin, and its TTFT p99 is lower
// than the adapter-blind kv's.
func TestLoRAResidency(t *testing.T) {
	wl, err := workload.Parse("multi-lora:adapters=32,zipf=1,prefix=512,suffix=64,n=3000,rate=120,output=16,seed=4")
	if err != nil {
		t.Fatal(err)
	}
	stats := map[route.Policy]AdapterStats{}
	p99 := map[route.Policy]float64{}
	for _, p := range []route.Policy{route.PolicyKV, PolicyLoRABlind, route.PolicyRoundRobin, PolicyLoRAAffinity} {
		var st AdapterStats
		cfg := config(p, 2)
		cfg.LoRASlots, cfg.AdapterStats = 4, &st
		res, err := Run(cfg, wl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 3000 || res.Errors != 0 || st.Requests != 3000 {
			t.Fatalf("%s: %d done, %d errors, %d adapter requests", p, res.Requests, res.Errors, st.Requests)
		}
		if st.Loads < 32 || st.Evictions > st.Loads || st.Loads-st.Evictions > 8*4 {
			t.Fatalf("%s: %d loads, %d evictions: more resident than 8 engines x 4 slots", p, st.Loads, st.Evictions)
		}
		stats[p], p99[p] = st, res.TTFT.P99
	}
	kv, blind, rr := stats[route.PolicyKV], stats[PolicyLoRABlind], stats[route.PolicyRoundRobin]
	if !(kv.Loads*2 < blind.Loads && blind.Loads < rr.Loads && kv.HitRate() > blind.HitRate()) {
		t.Fatalf("loads: kv %d, kv-lora-blind %d, round-robin %d; hit kv %.3f, blind %.3f", kv.Loads, blind.Loads, rr.Loads,
			kv.HitRate(), blind.HitRate())
	}
	if p99[route.PolicyKV] >= p99[PolicyLoRABlind] {
		t.Fatalf("TTFT p99: kv %.0f ms, kv-lora-blind %.0f ms", p99[route.PolicyKV], p99[PolicyLoRABlind])
	}
	if testing.Verbose() {
		for p, st := range stats {
			t.Logf("%-14s loads %4d hit %.3f TTFT p99 %.0f ms", p, st.Loads, st.HitRate(), p99[p])
		}
	}
}
