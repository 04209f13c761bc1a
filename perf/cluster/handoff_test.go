package cluster

import (
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/workload"
)

// TestHandoff: with prefill and decode engines every request completes,
// Always splits every one (the first token from a prefill engine, the
// rest from a decode engine after the KV link), conditional
// disaggregation splits some and not all under load, and the runs are
// repeatable; the goodput counts are consistent.
func TestHandoff(t *testing.T) {
	wl, err := workload.Parse("shared-prefix:groups=20,prefix=2048,suffix=512,n=160,rate=40,output=16,seed=5")
	if err != nil {
		t.Fatal(err)
	}
	run := func(d Disagg) (*GoodputStats, float64) {
		cfg := config(route.PolicyKV, 2)
		cfg.Engines, cfg.Disagg = 4, d
		cfg.SLO = SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}
		cfg.Goodput = &GoodputStats{}
		res, err := Run(cfg, wl, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := cfg.Goodput
		if res.Requests != 160 || res.Errors != 0 || g.Requests != 160 {
			t.Fatalf("%+v: %d done, %d errors %v, goodput %+v", d, res.Requests, res.Errors, res.FirstErrors, g)
		}
		if g.Met > g.TTFTMet || g.Met > g.TPOTMet || g.Met < g.TTFTMet+g.TPOTMet-g.Requests || g.Seconds <= 0 {
			t.Fatalf("%+v: inconsistent goodput %+v", d, g)
		}
		for id, w := range res.Engines {
			if d.Prefill > 0 && (id == "engine-0" || id == "engine-1") && w.Requests > 0 {
				t.Fatalf("%+v: %d requests ended on prefill engine %s", d, w.Requests, id)
			}
		}
		return g, res.ITL.P99
	}
	if g, _ := run(Disagg{}); g.Split != 0 {
		t.Fatalf("aggregated: %d split", g.Split)
	}
	always, itlP99 := run(Disagg{Prefill: 2, Always: true})
	if always.Split != 160 || itlP99 < 1 { // one gap in 15 is a hand-off, which holds the link's 1 ms latency
		t.Fatalf("always: %d split, ITL p99 %.3f ms", always.Split, itlP99)
	}
	again, _ := run(Disagg{Prefill: 2, Always: true})
	if *again != *always {
		t.Fatalf("not repeatable: %+v then %+v", always, again)
	}
	if cond, _ := run(Disagg{Prefill: 2}); cond.Split == 0 || cond.Split == 160 {
		t.Fatalf("conditional: %d of 160 split", cond.Split)
	}
}
