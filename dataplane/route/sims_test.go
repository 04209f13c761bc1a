package route

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
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
		s, err := sim.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = s.Serve(ln) }()
		t.Cleanup(s.Close)
		addrs = append(addrs, ln.Addr().String())
	}
	pool := engine.NewPool(engine.DefaultConfig(), index, addrs)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, len(addrs)); err != nil {
		t.Fatal(err)
	}
	return pool
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
