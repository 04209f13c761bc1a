package route

import (
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
)

// simEngines starts one simulated engine per configuration on loopback
// (ids sim-0, sim-1, ... where a configuration has none) and a pool on
// index connected to them, in that order, every engine ready.
func simEngines(t testing.TB, index *kvstore.Index, cfgs ...sim.Config) *engine.Pool {
	t.Helper()
	var addrs []string
	for i, cfg := range cfgs {
		if cfg.ID == "" || cfg.ID == sim.DefaultConfig().ID {
			cfg.ID = fmt.Sprintf("sim-%d", i)
		}
		_, addr := simtest.Serve(t, cfg)
		addrs = append(addrs, addr)
	}
	return simtest.Pool(t, engine.DefaultConfig(), index, addrs...)
}

// simConfigs is n copies of sim's default configuration with change applied.
func simConfigs(n int, change func(*sim.Config)) []sim.Config {
	cfgs := make([]sim.Config, n)
	for i := range cfgs {
		cfgs[i] = sim.DefaultConfig()
		change(&cfgs[i])
	}
	return cfgs
}
