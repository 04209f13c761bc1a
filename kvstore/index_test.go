package kvstore

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func addEngine(t testing.TB, ix *Index, id string, ranks int) []Slot {
	t.Helper()
	s, err := ix.AddEngine(EngineConfig{ID: id, Ranks: ranks, Capacity: [NumTiers]uint64{1000, 4000, 0}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func matchOne(ix *Index, hashes []uint64, s Slot) Match {
	out := make([]Match, 1)
	ix.Match(hashes, []Slot{s}, out)
	return out[0]
}

func TestMatchTiersAndGaps(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	b := addEngine(t, ix, "b", 1)[0]
	p := []uint64{11, 12, 13, 14, 15}
	must(t, ix.Apply(a, []Event{
		{Kind: Stored, Tier: TierGPU, Hashes: p[:2]},
		{Kind: Stored, Tier: TierCPU, Hashes: p[:3]}, // 11, 12 also on GPU: they count there
		{Kind: Stored, Tier: TierGPU, Hashes: p[4:]}, // 15 after a gap (14): not counted
	}))
	must(t, ix.Apply(b, []Event{{Kind: Stored, Tier: TierDisk, Hashes: p[1:]}})) // no block 0
	out := make([]Match, 3)
	ix.Match(p, []Slot{a, b, 999}, out)
	if want := (Match{Blocks: [NumTiers]uint32{2, 1, 0}}); out[0] != want {
		t.Fatalf("a: %+v want %+v", out[0], want)
	}
	if out[1].Depth() != 0 || out[2].Depth() != 0 {
		t.Fatalf("b or unknown matched: %+v %+v", out[1], out[2])
	}
	// A child stays when its parent is removed; matching stops at the parent.
	must(t, ix.Apply(a, []Event{{Kind: Removed, Tier: TierGPU, Hashes: p[:1]}, {Kind: Removed, Tier: TierCPU, Hashes: p[:1]}}))
	if d := matchOne(ix, p, a).Depth(); d != 0 {
		t.Fatalf("depth %d after removing block 0", d)
	}
	if d := matchOne(ix, p[1:], a).Depth(); d != 2 {
		t.Fatalf("children: depth %d, want 2", d)
	}
}

func TestRanksAreSeparate(t *testing.T) {
	ix := New(Options{})
	s := addEngine(t, ix, "dp", 2)
	must(t, ix.Apply(s[1], []Event{{Kind: Stored, Hashes: []uint64{1, 2}}}))
	out := make([]Match, 2)
	ix.Match([]uint64{1, 2}, s, out)
	if out[0].Depth() != 0 || out[1].Depth() != 2 {
		t.Fatalf("%+v", out)
	}
}

func TestRemoveEngineAndSlotReuse(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{1, 2, 3}}}))
	must(t, ix.RemoveEngine("a"))
	if err := ix.RemoveEngine("a"); !errors.Is(err, ErrUnknownEngine) {
		t.Fatalf("second remove: %v", err)
	}
	if err := ix.Apply(a, nil); !errors.Is(err, ErrUnknownSlot) {
		t.Fatalf("apply to removed slot: %v", err)
	}
	b := addEngine(t, ix, "b", 1)[0]
	if b != a {
		t.Fatalf("slot not reused: %d vs %d", b, a)
	}
	if d := matchOne(ix, []uint64{1, 2, 3}, b).Depth(); d != 0 {
		t.Fatalf("new engine in a reused slot sees %d old blocks", d)
	}
	if n := ix.Sweep(numShards); n != 3 {
		t.Fatalf("swept %d stale entries, want 3", n)
	}
	if st := ix.Stats(); st.Entries != 0 || st.Engines[0].Entries != 0 {
		t.Fatalf("after sweep: %+v", st)
	}
}

// TestGenerationWrap clears one tier far more than 256 times while blocks come
// and go: stale entries of a recycled generation must never come back.
func TestGenerationWrap(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	for k := range 1000 {
		must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{uint64(k%7 + 1)}}, {Kind: Cleared}}))
		for h := uint64(1); h <= 7; h++ {
			if d := matchOne(ix, []uint64{h}, a).Depth(); d != 0 {
				t.Fatalf("clear %d: block %d visible", k, h)
			}
		}
	}
	must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{3}}}))
	if matchOne(ix, []uint64{3}, a).Depth() != 1 || matchOne(ix, []uint64{4}, a).Depth() != 0 {
		t.Fatal("after the wraps only block 3 must be held")
	}
	if st := ix.Stats(); st.Engines[0].Blocks[TierGPU] != 1 {
		t.Fatalf("blocks %v", st.Engines[0].Blocks)
	}
}

func TestBadEvents(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	for _, ev := range []Event{{Kind: 0}, {Kind: 4}, {Kind: Stored, Tier: TierApprox}} {
		if err := ix.Apply(a, []Event{ev}); !errors.Is(err, ErrBadEvent) {
			t.Errorf("%+v: %v", ev, err)
		}
	}
	if _, err := ix.AddEngine(EngineConfig{ID: "a"}); !errors.Is(err, ErrEngineExists) {
		t.Errorf("duplicate engine: %v", err)
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestApproxMode(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Options{ApproxTTL: time.Minute, ApproxMaxBlocks: 4, Now: clock.Now})
	a := addEngine(t, ix, "a", 1)[0]
	must(t, ix.RecordApprox(a, []uint64{1, 2, 3}))
	if m := matchOne(ix, []uint64{1, 2, 3, 4}, a); m.Approx != 3 || m.Blocks != [NumTiers]uint32{} {
		t.Fatalf("approx match %+v", m)
	}
	// Capacity: 4 blocks; touching 1 makes 2 the least recently used.
	clock.now = clock.now.Add(10 * time.Second)
	must(t, ix.RecordApprox(a, []uint64{1, 5, 6}))
	if matchOne(ix, []uint64{2}, a).Depth() != 0 || matchOne(ix, []uint64{1}, a).Depth() != 1 {
		t.Fatal("LRU: block 2 should have left, block 1 stayed")
	}
	if st := ix.Stats(); st.Engines[0].Blocks[TierApprox] != 4 {
		t.Fatalf("approx blocks %d, want 4", st.Engines[0].Blocks[TierApprox])
	}
	// TTL: 3 was last used at t=0 and expires after a minute; 1, 5, 6 at t=10s.
	clock.now = clock.now.Add(55 * time.Second)
	if n := ix.ExpireApprox(); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	if matchOne(ix, []uint64{3}, a).Depth() != 0 || matchOne(ix, []uint64{5}, a).Depth() != 1 {
		t.Fatal("TTL")
	}
	// Precise events replace the approximate entries.
	must(t, ix.Apply(a, []Event{{Kind: Stored, Hashes: []uint64{9}}}))
	if m := matchOne(ix, []uint64{1}, a); m.Depth() != 0 {
		t.Fatalf("approx entry survived precise events: %+v", m)
	}
	must(t, ix.RecordApprox(a, []uint64{7}))
	if matchOne(ix, []uint64{7}, a).Depth() != 0 {
		t.Fatal("approx recorded for a precise engine")
	}
}

func TestApproxQueueStaysBounded(t *testing.T) {
	ix := New(Options{ApproxMaxBlocks: 100})
	a := addEngine(t, ix, "a", 1)[0]
	for range 1000 {
		must(t, ix.RecordApprox(a, []uint64{1, 2, 3})) // the same blocks, refreshed
	}
	ix.mu.RLock()
	q := len(ix.slots[a].approx.queue) - ix.slots[a].approx.head
	ix.mu.RUnlock()
	if q > 2*3+1024 {
		t.Fatalf("queue holds %d records for 3 blocks", q)
	}
}

func TestDigestSimilarity(t *testing.T) {
	var a, b Digest
	rng := rand.New(rand.NewPCG(3, 4))
	hs := make([]uint64, 10000)
	for i := range hs {
		hs[i] = rng.Uint64()
		a.add(hs[i])
		b.add(hs[i])
	}
	if s := Similarity(&a, &b); s != 1 {
		t.Fatalf("equal sets: %v", s)
	}
	b.remove(hs[0])
	if s := Similarity(&a, &b); s < 0.97 || s >= 1 {
		t.Fatalf("one block apart: %v", s)
	}
	var empty Digest
	if s := Similarity(&a, &empty); s != 0 {
		t.Fatalf("vs empty: %v", s)
	}
	round, ok := UnmarshalDigest(a.AppendBinary(nil))
	if !ok || round != a {
		t.Fatal("digest does not round-trip")
	}
}

// TestConcurrentMatchNeverTorn: a writer replaces one chain of blocks by the
// next in single batches while readers match; every reader must see each
// chain whole or not at all, never part of one batch.
func TestConcurrentMatchNeverTorn(t *testing.T) {
	ix := New(Options{})
	a := addEngine(t, ix, "a", 1)[0]
	const chainLen, batches = 64, 400
	chain := func(b int) []uint64 {
		hs := make([]uint64, chainLen)
		for i := range hs {
			hs[i] = uint64(b)<<32 | uint64(i) | 1<<63
		}
		return hs
	}
	var done atomic.Bool
	var latest atomic.Int64
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			out := make([]Match, 1)
			for !done.Load() {
				b := int(latest.Load()) - rng.IntN(2)
				ix.Match(chain(b), []Slot{a}, out)
				if d := out[0].Depth(); d != 0 && d != chainLen {
					t.Errorf("chain %d: torn match, depth %d", b, d)
					return
				}
			}
		}()
	}
	for b := 1; b <= batches; b++ {
		evs := []Event{{Kind: Removed, Hashes: chain(b - 1)}, {Kind: Stored, Hashes: chain(b)}}
		if b%50 == 0 {
			evs = append([]Event{{Kind: Cleared}}, evs[1])
		}
		must(t, ix.Apply(a, evs))
		latest.Store(int64(b))
		if b%37 == 0 {
			ix.Sweep(8)
		}
	}
	done.Store(true)
	wg.Wait()
}

func TestMatchDoesNotAllocate(t *testing.T) {
	ix := New(Options{})
	var slots []Slot
	for i := range 8 {
		slots = append(slots, addEngine(t, ix, string(rune('a'+i)), 1)[0])
	}
	hs := make([]uint64, 512)
	for i := range hs {
		hs[i] = uint64(i)*0x9E3779B97F4A7C15 + 1
	}
	for _, s := range slots {
		must(t, ix.Apply(s, []Event{{Kind: Stored, Hashes: hs}}))
	}
	out := make([]Match, len(slots))
	ix.Match(hs, slots, out)
	if out[3].Depth() != 512 {
		t.Fatalf("depth %d", out[3].Depth())
	}
	if raceEnabled {
		t.Skip("sync.Pool drops items on purpose under the race detector")
	}
	if a := testing.AllocsPerRun(100, func() { ix.Match(hs, slots, out) }); a != 0 {
		t.Fatalf("%v allocs per match", a)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestGenEqual(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		want uint8
	}{
		{0, 0, 0xf}, {0x01020304, 0x01020304, 0xf}, {0x01020304, 0x01020305, 0xe},
		{0xff000000, 0x00000000, 0x7}, {0x80808080, 0x00808000, 0x6}, {0x7f, 0xff, 0xe},
	} {
		if got := genEqual(c.a, c.b); got != c.want {
			t.Errorf("genEqual(%#x, %#x) = %#x, want %#x", c.a, c.b, got, c.want)
		}
	}
}

// TestLongRuns makes long probe runs: 300 engines store the same blocks, so
// each block's entries form one run of 300 and neighbours are pushed
// further still. Matching and backward-shift removal must hold up (the
// invariants build checks the Robin Hood order on each change).
func TestLongRuns(t *testing.T) {
	ix := New(Options{})
	const engines = 300
	hs := []uint64{11, 22, 33, 44}
	slots := make([]Slot, engines)
	for e := range engines {
		slots[e] = addEngine(t, ix, string(rune('A'+e)), 1)[0]
		must(t, ix.Apply(slots[e], []Event{{Kind: Stored, Hashes: hs}}))
	}
	out := make([]Match, engines)
	ix.Match(hs, slots, out)
	for e, m := range out {
		if m.Depth() != len(hs) {
			t.Fatalf("engine %d matches %d blocks, want %d", e, m.Depth(), len(hs))
		}
	}
	// Every other engine drops block 22 (removals shift runs back).
	for e := 0; e < engines; e += 2 {
		must(t, ix.Apply(slots[e], []Event{{Kind: Removed, Hashes: hs[1:2]}}))
	}
	ix.Match(hs, slots, out)
	for e, m := range out {
		if want := map[bool]int{true: 1, false: len(hs)}[e%2 == 0]; m.Depth() != want {
			t.Fatalf("engine %d matches %d blocks after removals, want %d", e, m.Depth(), want)
		}
	}
}
