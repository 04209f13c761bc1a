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

// mixedOutputs is n requests of prompt tokens, no two alike, one
// every gap, their outputs cycling through outputs.
func mixedOutputs(n, prompt int, gap time.Duration, outputs ...int) *workload.Workload {
	wl := &workload.Workload{Spec: "mixed outputs"}
	for i := range n {
		p := make([]uint32, prompt)
		for j := range p {
			p[j] = uint32((i*prompt + j) % 150000)
		}
		wl.Requests = append(wl.Requests, workload.Request{At: time.Duration(i) * gap, Prompt: p, Output: outputs[i%len(outputs)]})
	}
	return wl
}

// TestHandoffSplitTargets: with the targets among the routers' weights
// (route.Weights.SplitTargets), a 12,000-token prompt whose 2-token
// output cannot spread its transfer (some 70 ms over 25 GB/s) under a
// 50 ms TPOT is served aggregated, one of 300 tokens may still be split:
// conditional disaggregation splits fewer requests than on speed alone,
// and more meet the TPOT target.
func TestHandoffSplitTargets(t *testing.T) {
	wl := mixedOutputs(120, 12000, 250*time.Millisecond, 2, 300)
	run := func(targets route.SplitTargets) *GoodputStats {
		cfg := config(route.PolicyKV, 1)
		cfg.Engines, cfg.Disagg, cfg.Rank.GPUBlocks = 4, Disagg{Prefill: 2}, 16384
		cfg.Weights.SplitTargets = targets
		cfg.SLO = SLO{TTFT: 2 * time.Second, TPOT: 50 * time.Millisecond}
		cfg.Goodput = &GoodputStats{}
		res, err := Run(cfg, wl, nil)
		if err != nil || res.Requests != 120 || res.Errors != 0 {
			t.Fatalf("%+v: %v, %d done, %d errors %v", targets, err, res.Requests, res.Errors, res.FirstErrors)
		}
		return cfg.Goodput
	}
	speed, slo := run(route.SplitTargets{}), run(route.SplitTargets{TTFT: 2 * time.Second, TPOT: 50 * time.Millisecond})
	t.Logf("speed only: %+v; with targets: %+v", speed, slo)
	if speed.Split == 0 || slo.Split == 0 || slo.Split >= speed.Split || slo.TPOTMet <= speed.TPOTMet {
		t.Fatalf("speed only: %d split, %d within TPOT; with targets: %d split, %d within TPOT", speed.Split, speed.TPOTMet, slo.Split, slo.TPOTMet)
	}
}
