package route

import (
	"errors"
	"testing"
	"time"
)

// TestLoadViewSurvivesPositionReuse: the router finds an engine's load by
// its place in the pool, and a place is reused once its engine is
// removed. A decision still open on the removed engine releases its load
// there, and the newcomer at the same place starts from its own (each
// fails if loadOf trusts the place alone).
func TestLoadViewSurvivesPositionReuse(t *testing.T) {
	pool := simPool(t, 1)
	r := New(pool, PolicyKV, DefaultWeights())
	req := &Request{Model: "kvgate/sim", Tokens: make([]uint32, 64)}
	first, err := r.Route(req)
	if err != nil {
		t.Fatal(err)
	}
	old := first.Engine
	if _, err := pool.Remove(old.Addr); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if len(pool.Engines()) != 0 {
			return errors.New("the removed engine is still listed")
		}
		return nil
	})
	next := addZeroSim(t, pool, "sim-next", 1)
	if next.Pos() != old.Pos() {
		t.Fatalf("the newcomer took place %d, not the removed engine's %d", next.Pos(), old.Pos())
	}
	if got := r.Inflight(next).Requests; got != 0 {
		t.Fatalf("the newcomer starts with %d requests, want 0", got)
	}
	second, err := r.Route(req)
	if err != nil || second.Engine != next {
		t.Fatalf("routed %v to %v, want the newcomer", err, second)
	}
	first.Done()
	if a, b := r.Inflight(old).Requests, r.Inflight(next).Requests; a != 0 || b != 1 {
		t.Fatalf("after the removed engine's request ended: %d there and %d on the newcomer, want 0 and 1", a, b)
	}
	second.Done()
	if got := r.Inflight(next).Requests; got != 0 {
		t.Fatalf("the newcomer keeps %d requests, want 0", got)
	}
}
