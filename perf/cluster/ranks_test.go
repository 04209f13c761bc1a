package cluster

import (
	"math"
	"testing"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/workload"
)

// TestRanksAsEngines: at equal capacity, 2 engines of 4 data-parallel ranks
// routed by (engine, rank) find as much cached prefix as 8 engines of one,
// with TTFT p99 within a few percent; routed rank-blind (rank 0's cache
// matched, any rank sent) they lose most of it.
func TestRanksAsEngines(t *testing.T) {
	wl, err := workload.Parse("shared-prefix:groups=200,prefix=1024,suffix=64,n=1600,rate=60,output=8,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	run := func(policy route.Policy, engines, ranks int) (hit, p99 float64, cores int) {
		t.Helper()
		cfg := config(policy, 2)
		cfg.Engines, cfg.Ranks = engines, ranks
		res, err := Run(cfg, wl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 1600 || res.Errors != 0 {
			t.Fatalf("%s %dx%d: %d done, %d errors", policy, engines, ranks, res.Requests, res.Errors)
		}
		return res.PrefixHitRate, res.TTFT.P99, len(res.Engines)
	}
	flatHit, flatP99, flatCores := run(route.PolicyKV, 8, 1)
	rankHit, rankP99, rankCores := run(route.PolicyKV, 2, 4)
	blindHit, _, _ := run(PolicyRankBlind, 2, 4)
	if flatCores != 8 || rankCores != 8 {
		t.Fatalf("results name %d and %d engines, want 8 ranks each", flatCores, rankCores)
	}
	if math.Abs(rankHit-flatHit) > 0.03*flatHit || math.Abs(rankP99-flatP99) > 0.1*flatP99 {
		t.Fatalf("2x4 by rank: hit %.3f, TTFT p99 %.0f ms; 8x1: hit %.3f, p99 %.0f ms", rankHit, rankP99, flatHit, flatP99)
	}
	if blindHit > 0.7*rankHit {
		t.Fatalf("rank-blind hit %.3f is not far below rank-aware %.3f", blindHit, rankHit)
	}
	if testing.Verbose() {
		t.Logf("hit: 8x1 %.3f, 2x4 %.3f, 2x4 rank-blind %.3f; TTFT p99: 8x1 %.0f, 2x4 %.0f", flatHit, rankHit, blindHit, flatP99, rankP99)
	}
}
