package cluster

import (
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

func config(policy route.Policy, routers int) Config {
	rank := sim.DefaultConfig().Rank
	rank.GPUBlocks = 2048
	return Config{Engines: 8, Routers: routers, Policy: policy, Weights: route.DefaultWeights(), Rank: rank,
		SyncDelay: 5 * time.Millisecond, NetDelay: 200 * time.Microsecond, LoadPeriod: 50 * time.Millisecond, Seed: 1}
}

// TestSimulation: every request completes under every policy, runs are
// repeatable, and cache-aware routing finds far more cached prefix than
// round-robin on a shared-prefix workload, close to the oracle's.
func TestSimulation(t *testing.T) {
	wl, err := workload.Parse("shared-prefix:groups=40,prefix=1024,suffix=64,n=800,rate=30,output=8,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	hit := map[route.Policy]float64{}
	for _, p := range []route.Policy{route.PolicyKV, route.PolicyRoundRobin, route.PolicyLeastLoad, route.PolicySession,
		route.PolicyApproxPrefix, route.PolicyDynamo, PolicyOracle} {
		res, err := Run(config(p, 2), wl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 800 || res.Errors != 0 {
			t.Fatalf("%s: %d done, %d errors", p, res.Requests, res.Errors)
		}
		hit[p] = res.PrefixHitRate
		if p == route.PolicyKV {
			again, _ := Run(config(p, 2), wl, nil)
			if again.TTFT.P99 != res.TTFT.P99 || again.PrefixHitRate != res.PrefixHitRate {
				t.Fatal("the simulation is not repeatable")
			}
		}
	}
	if !(hit[route.PolicyKV] > 1.2*hit[route.PolicyRoundRobin] && hit[route.PolicyKV] > 0.9*hit[PolicyOracle]) {
		t.Fatalf("hit rates: %v", hit)
	}
	if testing.Verbose() {
		t.Logf("hit rates: %v", hit)
	}
}
