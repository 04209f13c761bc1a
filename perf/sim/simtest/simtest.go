// Package simtest runs simulated engines (perf/sim) on loopback for tests,
// and connects a router's engine pool to them.
package simtest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

// Serve runs a simulated engine of cfg on a loopback port until the test
// ends, and returns it and its address.
func Serve(t testing.TB, cfg sim.Config) (*sim.Server, string) {
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
	return s, ln.Addr().String()
}

// Pool connects a pool of cfg on index to addrs, closed when the test
// ends, and waits (30 s at most) until every engine is ready.
func Pool(t testing.TB, cfg engine.Config, index *kvstore.Index, addrs ...string) *engine.Pool {
	t.Helper()
	pool := engine.NewPool(cfg, index, addrs)
	t.Cleanup(pool.Close)
	WaitReady(t, pool, len(addrs))
	return pool
}

// WaitReady waits (30 s at most) until n of pool's engines are ready.
func WaitReady(t testing.TB, pool *engine.Pool, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, n); err != nil {
		t.Fatal(err)
	}
}
