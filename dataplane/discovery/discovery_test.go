package discovery

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

const wait = 10 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: still waiting for %s", wait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func addrs(p *engine.Pool) []string {
	var out []string
	for _, e := range p.Engines() {
		out = append(out, e.Addr)
	}
	slices.Sort(out)
	return out
}

func testPool(t *testing.T, static ...string) *engine.Pool {
	p := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), static)
	t.Cleanup(p.Close)
	return p
}

// TestReconcile: the pool holds the union of the sources plus the static
// engines; an address a source drops leaves unless another lists it; the
// static ones always stay.
func TestReconcile(t *testing.T) {
	p := testPool(t, "static:1")
	d := New(p, nil)
	d.Set("dns", []string{"a:1", "b:1"})
	d.Set("file", []string{"b:1", "c:1"})
	if got := addrs(p); !slices.Equal(got, []string{"a:1", "b:1", "c:1", "static:1"}) {
		t.Fatalf("pool %v", got)
	}
	d.Set("dns", []string{"static:1"})
	waitFor(t, "a:1 removed", func() bool { return slices.Equal(addrs(p), []string{"b:1", "c:1", "static:1"}) })
	d.Set("file", nil)
	d.Set("dns", nil)
	waitFor(t, "only the static engine", func() bool { return slices.Equal(addrs(p), []string{"static:1"}) })
}

// TestAdminEngines: the admin source adds and deletes; a deleted engine
// that DNS still lists stays deleted until DNS drops it and lists it again.
func TestAdminEngines(t *testing.T) {
	p := testPool(t)
	d := New(p, nil)
	if _, err := d.AddEngine("x:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddEngine("x:1"); !errors.Is(err, engine.ErrEngineExists) {
		t.Fatalf("adding twice: %v", err)
	}
	if _, err := d.AddEngine("no-port"); !errors.Is(err, engine.ErrBadAddress) {
		t.Fatalf("a bad address: %v", err)
	}
	d.Set("dns", []string{"y:1"})
	if _, err := d.RemoveEngine("y:1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "y:1 removed", func() bool { return slices.Equal(addrs(p), []string{"x:1"}) })
	d.Set("dns", []string{"y:1", "z:1"})
	if got := addrs(p); !slices.Equal(got, []string{"x:1", "z:1"}) {
		t.Fatalf("a deleted engine came back while DNS still listed it: %v", got)
	}
	d.Set("dns", nil)
	d.Set("dns", []string{"y:1"})
	waitFor(t, "y:1 back after DNS dropped and relisted it", func() bool { return slices.Equal(addrs(p), []string{"x:1", "y:1"}) })
	if _, err := d.RemoveEngine("nope:1"); !errors.Is(err, engine.ErrUnknownEngine) {
		t.Fatalf("removing an unknown engine: %v", err)
	}
}

// keySink records what FollowPool hands the ring.
type keySink chan []string

func (k keySink) SetEngines(keys []string) { k <- keys }

// TestFollowPool: the ring gets each engine's handshake id at its pool
// position once it has one, and loses a removed engine's.
func TestFollowPool(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile = "m", sim.ZeroProfile
	sims, err := sim.StartLocal(2, cfg, "eng")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sims.Close)
	p := testPool(t, sims.Addrs[0])
	sink := make(keySink, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); FollowPool(ctx, p, sink) }()
	t.Cleanup(func() { cancel(); <-done })
	expect := func(want ...string) {
		t.Helper()
		deadline := time.After(wait)
		for {
			select {
			case keys := <-sink:
				if slices.Equal(keys, want) {
					return
				}
			case <-deadline:
				t.Fatalf("the ring never got keys %q", want)
			}
		}
	}
	expect("eng-0")
	if _, err := p.Add(sims.Addrs[1]); err != nil {
		t.Fatal(err)
	}
	expect("eng-0", "eng-1")
	if _, err := p.Remove("eng-0"); err != nil {
		t.Fatal(err)
	}
	expect("", "eng-1")
}
