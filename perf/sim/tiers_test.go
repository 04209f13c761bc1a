package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TestEvictionMovesDown follows blocks through a one-block GPU, CPU and
// disk: each allocation pushes the last block a tier down, and the events
// say exactly that, in the order the index must apply them.
func TestEvictionMovesDown(t *testing.T) {
	m := newBlockManager(1, 1, 1)
	fill := func(h uint64) {
		b, ok := m.allocate()
		if !ok {
			t.Fatal("no free block")
		}
		m.commit(b, h, h-1, h > 1)
		m.release([]int32{b})
	}
	gpu := func(k kvstore.EventKind, h uint64) kvstore.Event {
		return kvstore.Event{Kind: k, Tier: kvstore.TierGPU, HasParent: k == kvstore.Stored && h > 1, Parent: parentIf(k, h), Hashes: []uint64{h}}
	}
	at := func(tier kvstore.Tier, k kvstore.EventKind, h uint64) kvstore.Event {
		ev := gpu(k, h)
		ev.Tier = tier
		return ev
	}
	const cpu, disk = kvstore.TierCPU, kvstore.TierDisk
	steps := []struct {
		fill uint64
		want []kvstore.Event
	}{
		{1, []kvstore.Event{gpu(kvstore.Stored, 1)}},
		{2, []kvstore.Event{gpu(kvstore.Removed, 1), at(cpu, kvstore.Stored, 1), gpu(kvstore.Stored, 2)}},
		{3, []kvstore.Event{gpu(kvstore.Removed, 2), at(cpu, kvstore.Removed, 1), at(cpu, kvstore.Stored, 2),
			at(disk, kvstore.Stored, 1), gpu(kvstore.Stored, 3)}},
		{4, []kvstore.Event{gpu(kvstore.Removed, 3), at(cpu, kvstore.Removed, 2), at(cpu, kvstore.Stored, 3),
			at(disk, kvstore.Removed, 1), at(disk, kvstore.Stored, 2), gpu(kvstore.Stored, 4)}},
	}
	ix := newEngineView(t)
	for _, s := range steps {
		fill(s.fill)
		got := m.events
		m.events = nil
		if !slices.EqualFunc(got, s.want, eventEqual) {
			t.Fatalf("fill %d: events\n%+v\nwant\n%+v", s.fill, got, s.want)
		}
		must(t, ix.ix.Apply(ix.slot, got))
		if err := m.check(nil); err != nil {
			t.Fatal(err)
		}
	}
	// Block 4 on the GPU, 3 in CPU memory, 2 on disk, 1 gone: the index
	// that applied the events says the same.
	for h, want := range map[uint64]kvstore.Tier{4: kvstore.TierGPU, 3: cpu, 2: disk} {
		out := make([]kvstore.Match, 1)
		ix.ix.Match([]uint64{h}, []kvstore.Slot{ix.slot}, out)
		if out[0].Blocks[want] != 1 || out[0].Depth() != 1 {
			t.Errorf("block %d: index match %+v, want it in %s", h, out[0], want)
		}
	}
	out := make([]kvstore.Match, 1)
	if ix.ix.Match([]uint64{1}, []kvstore.Slot{ix.slot}, out); out[0].Depth() != 0 {
		t.Errorf("block 1 left every tier, index match %+v", out[0])
	}
}

// TestNoCPUTierEvictsToDisk: without a CPU pool, GPU evictions go to disk.
func TestNoCPUTierEvictsToDisk(t *testing.T) {
	m := newBlockManager(1, 0, 4)
	b, _ := m.allocate()
	m.commit(b, 7, 0, false)
	m.release([]int32{b})
	m.events = nil
	if _, ok := m.allocate(); !ok {
		t.Fatal("no free block")
	}
	want := []kvstore.Event{{Kind: kvstore.Removed, Tier: kvstore.TierGPU, Hashes: []uint64{7}},
		{Kind: kvstore.Stored, Tier: kvstore.TierDisk, Hashes: []uint64{7}}}
	if !slices.EqualFunc(m.events, want, eventEqual) {
		t.Fatalf("events %+v, want %+v", m.events, want)
	}
}

func parentIf(k kvstore.EventKind, h uint64) uint64 {
	if k == kvstore.Stored && h > 1 {
		return h - 1
	}
	return 0
}

func eventEqual(a, b kvstore.Event) bool {
	return a.Kind == b.Kind && a.Tier == b.Tier && a.HasParent == b.HasParent && a.Parent == b.Parent && slices.Equal(a.Hashes, b.Hashes)
}

// TestLoadFromLowerTier pushes a prompt's blocks out of a small GPU into
// CPU memory or onto disk, runs the prompt again, and checks that the rank
// loads them instead of prefilling them, in the time its link says, moves
// them up out of the lower tier, and reports them to the router as cached.
func TestLoadFromLowerTier(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cpu, disk int
		tier      kvstore.Tier
	}{
		{"cpu", 64, 0, kvstore.TierCPU},
		{"disk", 0, 64, kvstore.TierDisk},
		// CPU memory keeps the last 8 evicted: a's first blocks are on disk.
		{"disk-below-cpu", 8, 64, kvstore.TierDisk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testTiers(40, tc.cpu, tc.disk)
			// Free compute, so a step's duration is its load time alone.
			cfg.Profile = ZeroProfile
			cfg.Profile.KVBytesPerToken = DefaultProfile.KVBytesPerToken
			c := newCore(t, cfg)
			view := newEngineView(t)
			run := func(stream uint32, prompt []uint32) (Output, [kvstore.NumTiers]int, time.Duration) {
				key := RequestKey{Stream: stream}
				must(t, c.Add(NewRequest(key, prompt, Params{MaxTokens: 1, IgnoreEOS: true}, kvstore.Keys{})))
				var first Output
				var loads [kvstore.NumTiers]int
				var loadTime time.Duration
				for !c.Idle() {
					res := c.Step()
					must(t, view.ix.Apply(view.slot, res.Events))
					for tier, n := range res.Loads {
						loads[tier] += n
					}
					loadTime += res.Duration
					for _, o := range res.Outputs {
						if o.First {
							first = o
						}
					}
				}
				checkView(t, view, c)
				return first, loads, loadTime
			}
			a := make([]uint32, 16*20+1) // 20 full blocks
			for i := range a {
				a[i] = uint32(i + 1)
			}
			run(1, a)
			// Two other prompts of 20 blocks evict all of a's from the GPU (and,
			// with 8 CPU blocks, out of CPU memory onto disk).
			for s := uint32(2); s <= 3; s++ {
				b := slices.Clone(a)
				for i := range b {
					b[i] += s << 20
				}
				run(s, b)
			}
			if n := c.CachedBlocks(a, nil); n != 0 {
				t.Fatalf("%d of a's blocks still on the GPU", n)
			}
			out, loads, took := run(4, a)
			if out.Cached != 20*16 {
				t.Errorf("cached %d tokens, want 320 (all 20 blocks from the %s tier)", out.Cached, tc.tier)
			}
			if loads[kvstore.TierCPU]+loads[kvstore.TierDisk] != 20 || loads[tc.tier] == 0 ||
				(tc.cpu == 0) != (loads[kvstore.TierCPU] == 0) || (tc.disk == 0) != (loads[kvstore.TierDisk] == 0) {
				t.Errorf("loads %v, want 20 from the lower tiers, some from %s", loads, tc.tier)
			}
			// Loaded blocks moved up: each is on the GPU and in no lower tier,
			// and the index, which applied the events, agrees (checkView above).
			hs, _ := c.hasher.Hash(nil, a, nil)
			for _, h := range hs[:20] {
				if _, gpu := c.blocks.cached[h]; !gpu || c.blocks.cpu.has(h) || c.blocks.disk.has(h) {
					t.Fatalf("block %#x after loading: gpu %v cpu %v disk %v", h, gpu, c.blocks.cpu.has(h), c.blocks.disk.has(h))
				}
			}
			// Compute is free here: the run took what its loads took, the two
			// tiers' links in parallel.
			bb := cfg.blockBytes()
			if want := max(DefaultCPULink.LoadTime(loads[kvstore.TierCPU], bb), DefaultDiskLink.LoadTime(loads[kvstore.TierDisk], bb)); took != want {
				t.Errorf("steps took %v, want the links' %v for loads %v", took, want, loads)
			}
		})
	}
}

func TestLinkLoadTime(t *testing.T) {
	bb := DefaultProfile.KVBytesPerToken * 16 // 2,359,296 bytes
	for _, tc := range []struct {
		link TierLink
		n    int
		want time.Duration
	}{
		{DefaultCPULink, 0, 0},
		{DefaultCPULink, 1, 10*time.Microsecond + 94371*time.Nanosecond},
		{DefaultCPULink, 100, 10*time.Microsecond + 9437184*time.Nanosecond},
		{DefaultDiskLink, 100, 100*time.Microsecond + 31668402*time.Nanosecond},
	} {
		if got := tc.link.LoadTime(tc.n, bb); got != tc.want {
			t.Errorf("%+v: %d blocks in %v, want %v", tc.link, tc.n, got, tc.want)
		}
	}
}

func TestRankTierCosts(t *testing.T) {
	cfg := testTiers(10, 20, 0)
	cfg.CPULink = TierLink{GBps: 50, Latency: 5 * time.Microsecond}
	tc := cfg.TierCosts()
	if tc.BlockBytes != 2359296 || len(tc.Links) != 1 || tc.Links[0] != (wire.TierLink{Tier: wire.TierCPU, LatencyNanos: 5000, BytesPerSecond: 50e9}) {
		t.Fatalf("%+v", tc)
	}
	cfg.DiskBlocks = 30
	if tc = cfg.TierCosts(); len(tc.Links) != 2 || tc.Links[1] != (wire.TierLink{Tier: wire.TierDisk, LatencyNanos: 100000, BytesPerSecond: 7.45e9}) {
		t.Fatalf("%+v", tc)
	}
	if caps := cfg.Capacities(); len(caps) != 3 || caps[2] != (wire.TierCapacity{Tier: wire.TierDisk, Blocks: 30}) {
		t.Fatalf("%+v", caps)
	}
	none := testRank(10, 0)
	if tc := none.TierCosts(); len(tc.Links) != 0 || tc.BlockBytes != 0 {
		t.Fatalf("no lower tier, costs %+v", tc)
	}
}

// TestLoadDoesNotBlockBatch: a request whose prefix comes up over a slow
// link waits for it; a cold request admitted beside it computes at once,
// its step as long as its own prefill, no load in it.
func TestLoadDoesNotBlockBatch(t *testing.T) {
	cfg := testTiers(44, 0, 64)
	cfg.DiskLink = TierLink{GBps: 0.1, Latency: time.Millisecond} // 20 blocks: 473 ms
	c := newCore(t, cfg)
	prompt := func(seed uint32) []uint32 {
		p := make([]uint32, 16*20+1)
		for i := range p {
			p[i] = seed<<20 + uint32(i)
		}
		return p
	}
	finish := func() {
		for !c.Idle() {
			c.Step()
		}
	}
	for s := uint32(1); s <= 4; s++ { // a, then three that push it onto disk
		must(t, c.Add(NewRequest(RequestKey{Stream: s}, prompt(s), Params{MaxTokens: 1, IgnoreEOS: true}, kvstore.Keys{})))
		finish()
	}
	if n := c.CachedBlocks(prompt(1), nil); n != 0 {
		t.Fatalf("%d of a's blocks still on the GPU", n)
	}
	must(t, c.Add(NewRequest(RequestKey{Stream: 5}, prompt(1), Params{MaxTokens: 1, IgnoreEOS: true}, kvstore.Keys{})))
	must(t, c.Add(NewRequest(RequestKey{Stream: 6}, prompt(6), Params{MaxTokens: 1, IgnoreEOS: true}, kvstore.Keys{})))
	var now time.Duration
	first := map[uint32]time.Duration{}
	cached := map[uint32]int{}
	for !c.Idle() {
		res := c.Step()
		now += res.Duration
		for _, o := range res.Outputs {
			if o.First {
				first[o.Key.Stream], cached[o.Key.Stream] = now, o.Cached
			}
		}
	}
	load := cfg.DiskLink.LoadTime(20, cfg.blockBytes())
	if want := cfg.Profile.StepTime(321, false, 0, 44*16); first[6] != want {
		t.Errorf("cold request's first token at %v, want its own prefill's %v", first[6], want)
	}
	if first[5] < load || cached[5] != 320 {
		t.Errorf("disk hit's first token at %v with %d cached, want after its %v load with 320", first[5], cached[5], load)
	}
}
