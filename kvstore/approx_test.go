package kvstore

import (
	"testing"
	"time"
)

// TestApproxUntilFirstEvent: a slot takes approximate entries until its
// first KV event, which clears them at once and turns recording off
// (Precise, lock-free); an empty snapshot, which an engine without events
// answers with, or a lost engine (Replace with nothing) drops them and
// leaves the slot as if it never had events; a non-empty snapshot makes it
// precise; a reused slot starts over.
func TestApproxUntilFirstEvent(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	record := func(hs ...uint64) { t.Helper(); must(t, ix.RecordApprox(a, hs)) }
	approx := func(hs ...uint64) uint32 { t.Helper(); return matchOne(ix, hs, a).Approx }
	stats := func() EngineStats { t.Helper(); return ix.Stats().Engines[0] }

	record(1, 2, 3)
	if approx(1, 2, 3) != 3 || ix.Precise(a) || stats().Precise {
		t.Fatalf("before any event: approx %d, precise %v", approx(1, 2, 3), ix.Precise(a))
	}
	must(t, ix.Replace(a, nil)) // an empty snapshot, or the engine lost
	if approx(1) != 0 || ix.Precise(a) {
		t.Fatalf("after an empty snapshot: approx %d, precise %v", approx(1), ix.Precise(a))
	}
	record(1, 2)
	if approx(1, 2) != 2 {
		t.Fatal("an empty snapshot turned recording off")
	}
	must(t, ix.Apply(a, nil)) // no event at all is not a first event
	if ix.Precise(a) || approx(1, 2) != 2 {
		t.Fatal("an empty batch counted as an event")
	}

	must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{1}}}))
	if m := matchOne(ix, []uint64{1, 2}, a); m.Approx != 0 || m.Blocks[TierGPU] != 1 || !ix.Precise(a) || !stats().Precise {
		t.Fatalf("after the first event: %+v, precise %v", m, ix.Precise(a))
	}
	if st := stats(); st.Blocks[TierApprox] != 0 {
		t.Fatalf("%d approximate blocks left after the first event", st.Blocks[TierApprox])
	}
	record(5, 6)
	if approx(5, 6) != 0 {
		t.Fatal("recorded for a slot that has had events")
	}

	must(t, ix.Replace(a, nil)) // lost: back to approximate until it sends events
	record(5)
	if approx(5) != 1 {
		t.Fatal("a lost engine's slot stayed precise")
	}
	must(t, ix.Replace(a, []Event{{Kind: Stored, Hashes: []uint64{7}}}))
	if approx(5) != 0 || !ix.Precise(a) || matchOne(ix, []uint64{7}, a).Blocks[TierGPU] != 1 {
		t.Fatal("a non-empty snapshot did not make the slot precise")
	}

	must(t, ix.RemoveEngine("a"))
	b := addEngine(t, ix, "b", 1)[0]
	if b != a || ix.Precise(b) {
		t.Fatalf("slot %d reused as %d, precise %v", a, b, ix.Precise(b))
	}
	must(t, ix.RecordApprox(b, []uint64{9}))
	if matchOne(ix, []uint64{9}, b).Approx != 1 {
		t.Fatal("a reused slot inherited its old engine's precision")
	}
	if ix.Precise(MaxSlots) || ix.Precise(Slot(len(ix.slots))) {
		t.Fatal("an unknown slot is precise")
	}
}

// TestApproxBounds: approximate entries are bounded by the slot's GPU
// capacity when ApproxMaxBlocks is unset, least recently used out first,
// and by the TTL.
func TestApproxBounds(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Options{ApproxTTL: time.Minute, Now: clock.Now})
	slots, err := ix.AddEngine(EngineConfig{ID: "a", Capacity: [NumTiers]uint64{8}})
	must(t, err)
	a := slots[0]
	for h := range uint64(12) {
		clock.now = clock.now.Add(time.Second)
		must(t, ix.RecordApprox(a, []uint64{h}))
	}
	if st := ix.Stats().Engines[0]; st.Blocks[TierApprox] != 8 {
		t.Fatalf("%d approximate blocks, want the capacity of 8", st.Blocks[TierApprox])
	}
	if matchOne(ix, []uint64{3}, a).Approx != 0 || matchOne(ix, []uint64{4}, a).Approx != 1 {
		t.Fatal("the least recently used did not leave first")
	}
	// Blocks 4..11 were used at 1005..1012 s; at 1066.5 s those before
	// 1006.5 s are past the minute.
	clock.now = time.Unix(1066, 5e8)
	if n := ix.ExpireApprox(); n != 2 {
		t.Fatalf("expired %d, want 2 (blocks 4 and 5)", n)
	}
	if matchOne(ix, []uint64{5}, a).Approx != 0 || matchOne(ix, []uint64{6}, a).Approx != 1 {
		t.Fatal("TTL")
	}
}

// TestRecordApproxPreciseAllocatesNothing: for a slot with events the call
// is an atomic load and a return.
func TestRecordApproxPreciseAllocatesNothing(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{1}}}))
	hs := []uint64{1, 2, 3}
	if n := testing.AllocsPerRun(100, func() { _ = ix.RecordApprox(a, hs) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
