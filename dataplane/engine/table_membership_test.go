package engine

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestAddRemoveAtRunTime: an engine added to a running pool takes requests
// after its handshake and fills its own slot; removed, it takes no new
// request, its open stream finishes, and then it leaves Engines and the
// index, and a later engine takes its position.
func TestAddRemoveAtRunTime(t *testing.T) {
	engA := ttStartEngine(t, ttHandshake("a"), nil)
	engB := ttStartEngine(t, ttHandshake("b"), nil)
	p, _ := ttPool(t, nil, engA.addr)
	a := p.Engines()[0]
	engA.accept(t)
	ttReady(t, a)

	changed := p.Changed()
	b, err := p.Add(engB.addr)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Add did not signal Changed")
	}
	if got := p.Engines(); len(got) != 2 || got[1] != b || b.Pos() != 1 {
		t.Fatalf("after Add: engines %v, pos %d", got, b.Pos())
	}
	cb := engB.accept(t)
	ttReady(t, b)
	if _, err := p.Add(engB.addr); !errors.Is(err, ErrEngineExists) {
		t.Fatalf("adding %s twice: %v", engB.addr, err)
	}
	cb.send(t, 0, ttBatch(1, 0, ttStored(wire.TierGPU, ttChainA...)))
	slot, _ := b.Slot()
	ttWaitFor(t, "b's blocks in the index", func() bool { return ttHeld(p.Index(), slot, ttChainA).Depth() == 3 })
	s, _ := ttOpen(t, b, cb)

	if _, err := p.Remove("b"); err != nil { // by its handshake id
		t.Fatal(err)
	}
	if b.Ready() || b.State() != StateDraining {
		t.Fatalf("removed engine: Ready %v, State %v", b.Ready(), b.State())
	}
	if _, err := b.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Generate on a removed engine: %v", err)
	}
	cb.send(t, s.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 9))
	if evs := ttCollect(t, s); !slices.Equal(ttTokens(evs), []uint32{9}) || evs[len(evs)-1].Err != nil {
		t.Fatalf("the open stream did not finish: %+v", evs)
	}
	ttWaitFor(t, "b out of the pool", func() bool { return len(p.Engines()) == 1 })
	if _, ok := p.Index().Slots(engB.addr); ok {
		t.Fatal("a removed engine still has slots in the index")
	}
	if _, ok := b.Slot(); ok {
		t.Fatal("a removed engine still reports a slot")
	}
	if _, ok := p.Lookup(engB.addr); ok {
		t.Fatal("Lookup finds a removed engine")
	}
	cb.hangup(t) // it disconnected
	c, err := p.Add(engB.addr)
	if err != nil || c.Pos() != 1 {
		t.Fatalf("re-adding: %v, pos %d (want b's freed position 1)", err, c.Pos())
	}
	engB.accept(t)
	ttReady(t, c)
}

// TestDrainKeepsListed: a drained engine finishes, leaves the index and
// stays listed as drained; Remove then unlists it.
func TestDrainKeepsListed(t *testing.T) {
	eng, p, e, c := ttConnected(t)
	c.send(t, 0, ttBatch(1, 0, ttStored(wire.TierGPU, ttChainB...)))
	slot, _ := e.Slot()
	ttWaitFor(t, "blocks", func() bool { return ttHeld(p.Index(), slot, ttChainB).Depth() == 3 })
	if _, err := p.Drain(eng.addr); err != nil {
		t.Fatal(err)
	}
	ttWaitFor(t, "drained", func() bool { return e.State() == StateDrained })
	if got := p.Engines(); len(got) != 1 || got[0] != e {
		t.Fatalf("a drained engine left the list: %v", got)
	}
	if _, ok := p.Index().Slots(eng.addr); ok {
		t.Fatal("a drained engine still has slots")
	}
	if _, err := p.Add(eng.addr); !errors.Is(err, ErrEngineExists) {
		t.Fatalf("adding a drained address: %v", err)
	}
	if _, err := p.Remove(eng.addr); err != nil {
		t.Fatal(err)
	}
	if len(p.Engines()) != 0 {
		t.Fatalf("Remove of a drained engine: %v still listed", p.Engines())
	}
}

// TestDrainTimeout: a stream that outlives the drain timeout ends with
// ErrEngineDown (a request before its first token is re-routed) and the
// engine leaves anyway.
func TestDrainTimeout(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("slow"), nil)
	p, _ := ttPool(t, func(c *Config) { c.DrainTimeout = 100 * time.Millisecond }, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	s, _ := ttOpen(t, e, c)
	if _, err := p.Remove(eng.addr); err != nil {
		t.Fatal(err)
	}
	evs := ttCollect(t, s)
	if err := evs[len(evs)-1].Err; !errors.Is(err, ErrEngineDown) {
		t.Fatalf("stream past the drain timeout ended with %v", err)
	}
	ttWaitFor(t, "gone", func() bool { return len(p.Engines()) == 0 })
}

// TestAdmittedAfterSnapshot: an engine that answers SNAPSHOT_REQUEST takes
// requests only once its snapshot is in the index; one that never answers
// is admitted after the snapshot wait.
func TestAdmittedAfterSnapshot(t *testing.T) {
	hs := ttHandshake("snap")
	hs.Features |= wire.FeatureSnapshot
	t.Run("snapshot", func(t *testing.T) {
		eng := ttStartEngine(t, hs, nil)
		p, _ := ttPool(t, func(c *Config) { c.SnapshotWait = time.Hour }, eng.addr)
		e := p.Engines()[0]
		c := eng.accept(t)
		var req wire.SnapshotRequest
		c.expect(t, &req)
		if e.Ready() {
			t.Fatal("ready before its snapshot")
		}
		c.send(t, 0, ttSnap(4, 0, 0, true, ttStored(wire.TierGPU, ttChainA...)))
		ttReady(t, e)
		slot, _ := e.Slot()
		if got := ttHeld(p.Index(), slot, ttChainA).Depth(); got != 3 {
			t.Fatalf("ready with %d blocks of its snapshot in the index", got)
		}
	})
	t.Run("no answer", func(t *testing.T) {
		eng := ttStartEngine(t, hs, nil)
		p, _ := ttPool(t, func(c *Config) { c.SnapshotWait = 50 * time.Millisecond }, eng.addr)
		eng.accept(t)
		ttReady(t, p.Engines()[0])
	})
}

// TestMembershipErrors: what Add, Drain and Remove refuse.
func TestMembershipErrors(t *testing.T) {
	p, _ := ttPool(t, nil)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"address without a port", func() error { _, err := p.Add("engine-0"); return err }(), ErrBadAddress},
		{"drain of an unknown engine", func() error { _, err := p.Drain("nope:1"); return err }(), ErrUnknownEngine},
		{"remove of an unknown engine", func() error { _, err := p.Remove("nope:1"); return err }(), ErrUnknownEngine},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	p.Close()
	if _, err := p.Add("127.0.0.1:1"); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if _, err := p.Drain("127.0.0.1:1"); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("Drain after Close: %v", err)
	}
}

// TestRemoveWhileGenerating: requests race a Remove. Every Generate that
// returns a stream gets its whole answer (the engine answers each GENERATE
// a little later), none is cut by the disconnect; the others are refused
// with ErrNotReady. Meanwhile engines join and leave, and Engines, Lookup
// and Changed are read, under the race detector.
func TestRemoveWhileGenerating(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("busy"), nil)
	p, _ := ttPool(t, func(c *Config) { c.DrainTimeout = time.Minute }, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	go func() { // answer every GENERATE after a moment, until the router hangs up
		for f := range c.frames {
			if f.Type == wire.TypeGenerate {
				time.Sleep(time.Millisecond)
				_ = c.Send(f.Stream, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 1))
			}
		}
	}()
	var wg sync.WaitGroup
	var served, refused atomic.Int64
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := e.Generate(ttGenerate("m"))
				if err != nil {
					if !errors.Is(err, ErrNotReady) {
						t.Errorf("Generate: %v", err)
					}
					refused.Add(1)
					runtime.Gosched()
					continue
				}
				last, ok := lastEvent(s)
				if !ok || last.Err != nil || last.Finish != wire.FinishStop {
					t.Errorf("a stream opened before the Remove was cut: %+v (ended %v)", last, ok)
					return
				}
				served.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() { // membership churn beside it
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a := ttDeadAddr(t)
			if _, err := p.Add(a); errors.Is(err, ErrEngineExists) {
				continue // a port given again while its engine still leaves
			} else if err != nil {
				t.Errorf("Add: %v", err)
			}
			_ = p.Changed()
			_, _ = p.Lookup(a)
			for _, x := range p.Engines() {
				_ = x.State()
			}
			if _, err := p.Remove(a); err != nil {
				t.Errorf("Remove: %v", err)
			}
		}
	}()
	ttWaitFor(t, "requests served", func() bool { return served.Load() >= 20 })
	if _, err := p.Remove(e.Addr); err != nil {
		t.Fatal(err)
	}
	ttWaitFor(t, "requests refused after the Remove", func() bool { return refused.Load() >= 20 })
	ttWaitFor(t, "the engine gone", func() bool { _, ok := p.Lookup(e.Addr); return !ok })
	close(stop)
	wg.Wait()
	t.Logf("%d served, %d refused", served.Load(), refused.Load())
}

// lastEvent waits for a stream's last event, off the test's goroutine
// (false after ttWait without one).
func lastEvent(s *Stream) (Event, bool) {
	timeout := time.After(ttWait)
	for {
		select {
		case <-s.Ready():
		case <-timeout:
			return Event{}, false
		}
		for _, ev := range s.Take() {
			if ev.Last {
				return ev, true
			}
		}
	}
}
