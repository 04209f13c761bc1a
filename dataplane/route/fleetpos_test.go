package route

import (
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
	"github.com/kvgate/kvgate/syncring"
)

// TestFleetFollowsPoolPositions: an engine added to the pool after the
// router was made is broadcast, read and looked up at its own position
// (engine.Engine.Pos), the one the ring's vectors use for it.
func TestFleetFollowsPoolPositions(t *testing.T) {
	pool := simPool(t, 2)
	f := &fakeFleet{peers: make([]syncring.Load, 3), reserved: map[int]int64{}}
	f.peers[2] = syncring.Load{Requests: 7}
	r := New(pool, PolicyKV, DefaultWeights())
	r.SetFleet(f)
	late := addZeroSim(t, pool, "sim-late", 3)
	for _, e := range pool.Engines()[:2] {
		if _, err := pool.Drain(e.Addr); err != nil {
			t.Fatal(err)
		}
	}
	d, err := r.Route(&Request{Model: "kvgate/sim", Tokens: make([]uint32, 64)})
	if err != nil || d.Engine != late || late.Pos() != 2 {
		t.Fatalf("routed %v to %v (pos %d)", err, d, late.Pos())
	}
	if f.reserved[2] != 64 {
		t.Fatalf("broadcast %v, want 64 prefill tokens at position 2", f.reserved)
	}
	own := make([]syncring.Load, 3)
	r.ReadLoad(own, func() {})
	if own[2].Requests != 1 {
		t.Fatalf("ReadLoad %+v, want the request at position 2", own)
	}
	if got := r.PeerLoad(late); got.Requests != 7 {
		t.Fatalf("PeerLoad of the late engine %+v, want position 2's", got)
	}
	fmt.Println("ok")
}

// addZeroSim adds a zero-cost simulated engine named id to pool and waits
// until ready engines number ready.
func addZeroSim(t *testing.T, pool *engine.Pool, id string, ready int) *engine.Engine {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.ID, cfg.Rank.Profile = id, sim.ZeroProfile
	_, addr := simtest.Serve(t, cfg)
	e, err := pool.Add(addr)
	if err != nil {
		t.Fatal(err)
	}
	simtest.WaitReady(t, pool, ready)
	return e
}
