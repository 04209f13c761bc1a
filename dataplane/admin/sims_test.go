package admin

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

// simEnginePool starts one simulated engine of cfg on loopback and a pool
// connected to it, the engine ready.
func simEnginePool(t *testing.T, cfg sim.Config) *engine.Pool {
	t.Helper()
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
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), []string{ln.Addr().String()})
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return pool
}
