package cluster

import (
	"testing"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/workload"
)

// TestTieredRouting: with GPU caches a quarter of what the shared prefixes
// need and CPU tiers that hold the rest, kv, whose index hears the CPU
// events, finds far more of the prompts cached than kv whose index hears
// only the GPU's, comes near the pooled LRU ideal of the same total size,
// and starts the slowest requests sooner.
func TestTieredRouting(t *testing.T) {
	// 400 prefixes of 64 blocks: 3,200 blocks per engine when placed well.
	wl, err := workload.Parse("shared-prefix:groups=400,prefix=1024,suffix=64,n=4000,rate=30,output=8,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	const gpu, cpu = 1024, 3072
	hit, p99 := map[route.Policy]float64{}, map[route.Policy]float64{}
	for _, p := range []route.Policy{route.PolicyKV, PolicyTierBlind} {
		cfg := config(p, 2)
		cfg.Rank.GPUBlocks, cfg.Rank.CPUBlocks = gpu, cpu
		res, err := Run(cfg, wl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 4000 || res.Errors != 0 {
			t.Fatalf("%s: %d done, %d errors", p, res.Requests, res.Errors)
		}
		hit[p], p99[p] = res.PrefixHitRate, res.TTFT.P99
	}
	rank := config(route.PolicyKV, 1).Rank
	ideal, err := PooledLRU(wl, kvstore.HashConfig{BlockSize: rank.BlockSize, Seed: rank.HashSeed, Model: rank.Model}, 8*(gpu+cpu))
	if err != nil {
		t.Fatal(err)
	}
	if !(hit[route.PolicyKV] > 1.5*hit[PolicyTierBlind] && hit[route.PolicyKV] > 0.9*ideal && p99[route.PolicyKV] < p99[PolicyTierBlind]) {
		t.Fatalf("hit rates %v, pooled ideal %.3f, TTFT p99 %v", hit, ideal, p99)
	}
	if testing.Verbose() {
		t.Logf("hit rates %v, pooled ideal %.3f, TTFT p99 %v", hit, ideal, p99)
	}
}
