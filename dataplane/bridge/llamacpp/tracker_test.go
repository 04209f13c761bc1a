package llamacpp

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// index is a router's view built from the tracker's events alone.
type index map[uint64]bool

// apply applies events as a router's index would, failing on what a
// router could not make sense of: a block stored twice, a parent it does
// not hold, a removal of a block it does not hold.
func (ix index) apply(t testing.TB, evs []wire.Event) {
	t.Helper()
	for _, ev := range evs {
		hs := ev.Hashes.AppendTo(nil)
		switch ev.Kind {
		case wire.EventStored:
			if ev.HasParent && !ix[ev.Parent] {
				t.Fatalf("stored under parent %x the index does not hold", ev.Parent)
			}
			for _, h := range hs {
				if ix[h] {
					t.Fatalf("block %x stored twice", h)
				}
				ix[h] = true
			}
		case wire.EventRemoved:
			for _, h := range hs {
				if !ix[h] {
					t.Fatalf("block %x removed but not held", h)
				}
				delete(ix, h)
			}
		case wire.EventCleared:
			clear(ix)
		}
	}
}

// trackerRig drives a Tracker and checks after every step that the
// events it returned keep a router's index equal to its own blocks and
// to its snapshot.
type trackerRig struct {
	t   *testing.T
	tr  *Tracker
	ix  index
	now time.Time
}

const rigBlock = 4

func newRig(t *testing.T, slots int) *trackerRig {
	return &trackerRig{t: t, tr: NewTracker(hasher(t, rigBlock), slots, time.Second), ix: index{}, now: time.Unix(1000, 0)}
}

func (r *trackerRig) step(evs []wire.Event) {
	r.t.Helper()
	r.ix.apply(r.t, evs)
	snap := index{}
	for _, ev := range r.tr.Snapshot() {
		snap[ev.Hashes.At(0)] = true
	}
	if !maps.Equal(snap, r.ix) || len(snap) != r.tr.Blocks() {
		r.t.Fatalf("index from events %d blocks, snapshot %d, tracker %d", len(r.ix), len(snap), r.tr.Blocks())
	}
}

// holds says whether the index holds exactly the full blocks of the given
// sequences (their union).
func (r *trackerRig) holds(seqs ...[]uint32) {
	r.t.Helper()
	want := index{}
	for _, s := range seqs {
		hs, _ := r.tr.h.Hash(nil, s, nil)
		for _, h := range hs {
			want[h] = true
		}
	}
	if !maps.Equal(want, r.ix) {
		r.t.Fatalf("index holds %d blocks, want %d", len(r.ix), len(want))
	}
}

func (r *trackerRig) observe(since uint64, slots ...Slot) {
	r.t.Helper()
	r.step(r.tr.Observe(since, slots, r.now))
}

func idle(task, n int) Slot { return Slot{ID: -1, NCtx: 64, Task: &task, NPromptTokens: n} }

func busy(task, n, cached, done int) Slot {
	s := idle(task, n)
	s.IsProcessing, s.NPromptCache, s.NPromptDone = true, cached, done
	return s
}

func slotsOf(ss ...Slot) []Slot {
	for i := range ss {
		ss[i].ID = i
	}
	return ss
}

func cat(parts ...[]uint32) []uint32 { return slices.Concat(parts...) }

// TestTrackerRequests: a request's prompt appears with its first token,
// the slot it ends on holds its prompt and generated ids up to the
// server's count, a second request sharing the prefix adds only its own
// blocks, a slot taken by a new prompt loses its old blocks but those
// another slot holds.
func TestTrackerRequests(t *testing.T) {
	r := newRig(t, 2)
	a, gen := seq(100, 10), seq(500, 7) // 10 prompt tokens: 2 full blocks
	r.step(r.tr.Hold(1, a))
	r.holds(a)
	r.step(r.tr.Settle(1, 0, cat(a, gen)[:16], 16)) // 10 + 7 - 1 cached
	r.holds(cat(a, gen)[:16])
	r.observe(r.tr.Epoch(), slotsOf(idle(7, 16), idle(-1, 0))...) // task 7 adopted
	b := cat(a[:8], seq(900, 8))                                  // shares 2 blocks
	evs := r.tr.Hold(2, b)
	if len(evs) != 1 || evs[0].Kind != wire.EventStored || !evs[0].HasParent || evs[0].Hashes.Len() != 2 {
		t.Fatalf("second prompt's events %+v: want its own 2 blocks under the shared prefix", evs)
	}
	r.step(evs)
	r.step(r.tr.Settle(2, 1, b, 16))
	r.holds(cat(a, gen)[:16], b)
	// A new prompt takes slot 0: once its task is seen started with no
	// reuse, slot 0's blocks leave, but those slot 1 holds.
	r.observe(r.tr.Epoch(), slotsOf(busy(9, 40, 0, 40), idle(8, 16))...)
	r.holds(b)
	c := seq(2000, 12)
	r.step(r.tr.Hold(3, c))
	r.step(r.tr.Settle(3, 0, c, 12))
	r.holds(b, c)
}

// TestTrackerPolls: what /slots corrects. A task not yet begun leaves the
// slot alone; one begun keeps the prefix it reused; another client's task
// that ends keeps that prefix, one never seen begun keeps nothing (after
// the grace for a last event on its way); an idle slot with fewer tokens
// was cleared; a poll begun before a request settled does not undo it.
func TestTrackerPolls(t *testing.T) {
	r := newRig(t, 1)
	a := seq(100, 16)
	r.step(r.tr.Hold(1, a))
	r.step(r.tr.Settle(1, 0, a, 16))
	stale := r.tr.Epoch() - 1
	r.observe(stale, slotsOf(busy(5, 16, 0, 0))...) // begun before the Settle: ignored
	r.holds(a)
	r.observe(r.tr.Epoch(), slotsOf(idle(5, 16))...)
	r.observe(r.tr.Epoch(), slotsOf(busy(6, 16, 0, 0))...) // another task, not begun: slot unchanged
	r.holds(a)
	r.observe(r.tr.Epoch(), slotsOf(busy(6, 30, 8, 22))...) // begun, reusing 8 tokens
	r.holds(a[:8])
	r.observe(r.tr.Epoch(), slotsOf(idle(6, 31))...) // done: within the grace, kept
	r.holds(a[:8])
	r.now = r.now.Add(2 * time.Second)
	r.observe(r.tr.Epoch(), slotsOf(idle(6, 31))...) // past the grace, seen reusing 8: kept
	r.holds(a[:8])
	r.observe(r.tr.Epoch(), slotsOf(idle(7, 20))...) // a task never seen begun
	r.now = r.now.Add(2 * time.Second)
	r.observe(r.tr.Epoch(), slotsOf(idle(7, 20))...)
	r.holds()
	b := seq(300, 12)
	r.step(r.tr.Hold(2, b))
	r.step(r.tr.Settle(2, 0, b, 12))
	r.observe(r.tr.Epoch(), slotsOf(idle(8, 12))...)
	r.observe(r.tr.Epoch(), slotsOf(idle(8, 0))...) // erased (or purged): nothing
	r.holds()
}

// TestTrackerOrphans: a request that ended without a last event keeps its
// blocks while an orphan, moves to the one idle slot it fits once the
// grace has passed, and expires when none shows.
func TestTrackerOrphans(t *testing.T) {
	r := newRig(t, 2)
	a, b := seq(100, 12), seq(700, 8)
	r.step(r.tr.Hold(1, a))
	r.step(r.tr.End(1, r.now, cat(a, seq(50, 3))...))
	r.holds(cat(a, seq(50, 3)))
	r.observe(r.tr.Epoch(), slotsOf(idle(4, 14), idle(-1, 0))...)
	r.now = r.now.Add(2 * time.Second)
	r.observe(r.tr.Epoch(), slotsOf(idle(4, 14), idle(-1, 0))...) // 14 cached: the orphan's first 14
	r.holds(cat(a, seq(50, 3))[:14])
	if len(r.tr.reqs) != 0 {
		t.Fatalf("orphan still held after placing: %d", len(r.tr.reqs))
	}
	r.step(r.tr.Hold(2, b))
	r.step(r.tr.End(2, r.now))
	r.now = r.now.Add(10 * time.Second) // nowhere to go: expires
	r.observe(r.tr.Epoch(), slotsOf(idle(4, 14), idle(-1, 0))...)
	r.holds(cat(a, seq(50, 3))[:14])
	r.step(r.tr.Clear())
	r.holds()
}

// TestTrackerShapes: settling on a slot the server did not list grows the
// view, and a shrunk /slots drops the slots gone.
func TestTrackerShapes(t *testing.T) {
	r := newRig(t, 1)
	a := seq(1, 8)
	r.step(r.tr.Hold(1, a))
	r.step(r.tr.Settle(1, 3, a, 8))
	r.holds(a)
	r.observe(r.tr.Epoch(), slotsOf(idle(-1, 0))...)
	r.holds()
	if got := fmt.Sprint(len(r.tr.slots)); got != "4" {
		t.Fatalf("%s slots", got)
	}
}
