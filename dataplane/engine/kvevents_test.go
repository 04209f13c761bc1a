package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// randomEvents is an EVENTS frame's worth of events of every kind, with
// groups, parents and hash runs of random lengths.
func randomEvents(rng *rand.Rand, n, maxHashes int) []wire.Event {
	evs := make([]wire.Event, n)
	for i := range evs {
		kind := []wire.EventKind{wire.EventStored, wire.EventRemoved, wire.EventCleared}[rng.IntN(3)]
		ev := wire.Event{Kind: kind, Tier: wire.Tier(rng.IntN(3)), Group: uint16(rng.IntN(3))}
		if kind != wire.EventCleared {
			hs := make([]uint64, 1+rng.IntN(maxHashes))
			for j := range hs {
				hs[j] = rng.Uint64()
			}
			ev.Hashes = wire.HashesOf(hs)
		}
		if kind == wire.EventStored && rng.IntN(2) == 0 {
			ev.HasParent, ev.Parent = true, rng.Uint64()
		}
		evs[i] = ev
	}
	return evs
}

// TestKVScratchIsConvertEvents: frame after frame, the scratch's events
// are convertEvents' (the snapshot path's, which keeps its copies), group
// kept or not, whatever the frame before them held.
func TestKVScratchIsConvertEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var s kvScratch
	for round := range 200 {
		evs := randomEvents(rng, rng.IntN(12), 40)
		groups := round%2 == 0
		got := s.convert(evs, groups)
		want := convertEvents(evs, groups)
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("round %d: %+v, want %+v", round, got, want)
		}
		s.release()
	}
}

// TestKVScratchAllocs: once its room has grown, converting a frame
// allocates nothing.
func TestKVScratchAllocs(t *testing.T) {
	evs := randomEvents(rand.New(rand.NewPCG(7, 8)), 8, 32)
	var s kvScratch
	s.convert(evs, true)
	s.release()
	if n := testing.AllocsPerRun(100, func() {
		s.convert(evs, true)
		s.release()
	}); n != 0 {
		t.Fatalf("%v allocations a frame, want 0", n)
	}
}

// TestKVScratchLetsLargeRoomGo: a frame larger than maxKeptHashes is
// converted whole, and its room is not kept for the engine's life.
func TestKVScratchLetsLargeRoomGo(t *testing.T) {
	hs := make([]uint64, maxKeptHashes+1)
	for i := range hs {
		hs[i] = uint64(i)
	}
	var s kvScratch
	got := s.convert([]wire.Event{{Kind: wire.EventRemoved, Hashes: wire.HashesOf(hs)}}, false)
	if len(got) != 1 || len(got[0].Hashes) != len(hs) || got[0].Hashes[len(hs)-1] != uint64(len(hs)-1) {
		t.Fatalf("large frame converted to %d events", len(got))
	}
	s.release()
	if cap(s.hashes) != 0 {
		t.Fatalf("kept room for %d hashes, want none past %d", cap(s.hashes), maxKeptHashes)
	}
	s.convert(randomEvents(rand.New(rand.NewPCG(9, 10)), 4, 8), false)
	s.release()
	if c := cap(s.hashes); c == 0 || c > maxKeptHashes {
		t.Fatalf("room for %d hashes after a small frame", c)
	}
}

// BenchmarkConvertEvents converts one step's EVENTS frame (8 events of 4
// blocks) for the index: new copies (convertEvents, the snapshot path)
// against the read loop's kept room.
func BenchmarkConvertEvents(b *testing.B) {
	evs := randomEvents(rand.New(rand.NewPCG(11, 12)), 8, 4)
	b.Run("copies", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			convertedKept = convertEvents(evs, true)
		}
	})
	b.Run("kept", func(b *testing.B) {
		var s kvScratch
		b.ReportAllocs()
		for b.Loop() {
			convertedKept = s.convert(evs, true)
			s.release()
		}
	})
}

var convertedKept []kvstore.Event
