package engine

import (
	"slices"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Block hashes of the index cases: three chains of three blocks.
var (
	ttChainA = []uint64{0xa1, 0xa2, 0xa3}
	ttChainB = []uint64{0xb1, 0xb2, 0xb3}
)

func ttStored(tier wire.Tier, hashes ...uint64) wire.Event {
	return wire.Event{Kind: wire.EventStored, Tier: tier, Hashes: wire.HashesOf(hashes)}
}

func ttRemoved(tier wire.Tier, hashes ...uint64) wire.Event {
	return wire.Event{Kind: wire.EventRemoved, Tier: tier, Hashes: wire.HashesOf(hashes)}
}

func ttCleared(tier wire.Tier) wire.Event { return wire.Event{Kind: wire.EventCleared, Tier: tier} }

func ttBatch(seq uint64, rank uint16, evs ...wire.Event) *wire.KVEvents {
	return &wire.KVEvents{Seq: seq, DPRank: rank, Events: evs}
}

func ttSnap(seq uint64, rank uint16, chunk uint32, last bool, evs ...wire.Event) *wire.Snapshot {
	return &wire.Snapshot{SnapshotID: 1, Chunk: chunk, Last: last, Seq: seq, DPRank: rank, Events: evs}
}

// ttHolds is what one rank of the engine should hold of a chain: leading
// blocks per tier (GPU, CPU, disk).
type ttHolds struct {
	rank   uint16
	chain  []uint64
	blocks [kvstore.NumTiers]uint32
}

// ttStep sends frames on stream 0, then checks the index and the
// SNAPSHOT_REQUESTs the router sent meanwhile.
type ttStep struct {
	send     []wire.Message
	holds    []ttHolds
	requests []uint32 // snapshot ids asked for, in order
}

// ttFeed runs steps against an engine announcing hs (compressing its events
// with codec), with a bystander engine in the same pool whose slot must
// never see the blocks.
func ttFeed(t *testing.T, hs wire.Handshake, codec wire.Codec, steps []ttStep) {
	t.Helper()
	eng := ttStartEngine(t, hs, nil)
	bystander := ttStartEngine(t, ttHandshake("bystander"), nil)
	p, _ := ttPool(t, nil, eng.addr, bystander.addr)
	e, b := p.Engines()[0], p.Engines()[1]
	c := eng.accept(t)
	bystander.accept(t)
	if hs.Features&wire.FeatureSnapshot != 0 {
		var req wire.SnapshotRequest
		if c.expect(t, &req); req.SnapshotID != 1 {
			t.Fatalf("first SNAPSHOT_REQUEST asks for %d, want 1", req.SnapshotID)
		}
	}
	ttReady(t, e)
	ttReady(t, b)
	c.SetCodec(codec)
	slots, _ := p.Index().Slots(e.Addr)
	other, _ := b.Slot()
	ranks := max(int(hs.DPRanks), 1)
	var applied uint64
	for i, st := range steps {
		for _, m := range st.send {
			c.send(t, 0, m)
			if kv, ok := m.(*wire.KVEvents); ok && int(kv.DPRank) < ranks {
				applied += uint64(len(kv.Events))
			}
		}
		ttBarrier(t, c, e)
		if got := ttRequests(t, e, c); !slices.Equal(got, st.requests) {
			t.Errorf("step %d: SNAPSHOT_REQUESTs %v, want %v", i, got, st.requests)
		}
		for _, h := range st.holds {
			if got := ttHeld(p.Index(), slots[h.rank], h.chain); got.Blocks != h.blocks || got.Approx != 0 {
				t.Errorf("step %d: rank %d holds %+v of %#x, want %v", i, h.rank, got, h.chain, h.blocks)
			}
			if got := ttHeld(p.Index(), other, h.chain); got.Depth() != 0 {
				t.Errorf("step %d: the bystander engine holds %+v of %#x", i, got, h.chain)
			}
		}
		if got := p.EventsApplied(); got != applied {
			t.Errorf("step %d: EventsApplied() = %d, want %d", i, got, applied)
		}
	}
	if !e.Ready() {
		t.Errorf("after the events the engine is %v", e.State())
	}
}

// ttBarrier returns once the router has read everything the engine sent
// before it: a LOAD with a fresh running count, which the read loop takes
// in order.
func ttBarrier(t testing.TB, c *ttConn, e *Engine) {
	t.Helper()
	_, seq, _ := e.LoadReport()
	c.send(t, 0, &wire.Load{Running: uint32(seq + 1)})
	ttWaitFor(t, "the barrier LOAD", func() bool {
		_, got, _ := e.LoadReport()
		return got == seq+1
	})
}

// ttRequests opens a stream and returns the snapshot ids the router asked
// for before its GENERATE, which it sends after everything it sent before.
func ttRequests(t testing.TB, e *Engine, c *ttConn) []uint32 {
	t.Helper()
	if _, err := e.Generate(ttGenerate("m")); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var ids []uint32
	for {
		f := c.next(t)
		switch f.Type {
		case wire.TypeGenerate:
			return ids
		case wire.TypeSnapshotRequest:
			var m wire.SnapshotRequest
			if err := wire.DecodeFrame(f, &m, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.SnapshotID)
		default:
			t.Fatalf("router sent %s on stream %d", f.Type, f.Stream)
		}
	}
}

// TestKVEvents: each KV_EVENTS batch lands in the slot of its engine and
// rank, in its tier, compressed or not; ranks the engine did not announce
// are ignored.
func TestKVEvents(t *testing.T) {
	gpu, cpu, disk := wire.TierGPU, wire.TierCPU, wire.TierDisk
	twoRanks := ttHandshake("e")
	twoRanks.DPRanks = 2
	cases := []struct {
		name  string
		hs    wire.Handshake
		codec wire.Codec
		steps []ttStep
	}{
		{name: "stored on GPU", hs: ttHandshake("e"), steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}, {0, ttChainB, [3]uint32{}}},
		}}},
		{name: "stored on CPU and disk", hs: ttHandshake("e"), steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(cpu, ttChainA[:2]...), ttStored(disk, ttChainA[2]))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{0, 2, 1}}},
		}}},
		{name: "stored, then removed", hs: ttHandshake("e"), steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}, {
			send:  []wire.Message{ttBatch(2, 0, ttRemoved(gpu, ttChainA[1]))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{1, 0, 0}}},
		}}},
		{name: "cleared tier only", hs: ttHandshake("e"), steps: []ttStep{{
			send: []wire.Message{
				ttBatch(1, 0, ttStored(gpu, ttChainA...), ttStored(cpu, ttChainB...)),
				ttBatch(2, 0, ttCleared(gpu)),
			},
			holds: []ttHolds{{0, ttChainA, [3]uint32{}}, {0, ttChainB, [3]uint32{0, 3, 0}}},
		}}},
		{name: "each rank its own slot", hs: twoRanks, steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 1, ttStored(gpu, ttChainA...)), ttBatch(1, 0, ttStored(gpu, ttChainB[:1]...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{}}, {1, ttChainA, [3]uint32{3, 0, 0}}, {0, ttChainB, [3]uint32{1, 0, 0}}, {1, ttChainB, [3]uint32{}}},
		}}},
		{name: "rank not announced is ignored", hs: ttHandshake("e"), steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 3, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{}}},
		}}},
		{name: "s2-compressed", hs: ttHandshake("e"), codec: wire.CodecS2, steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}}},
		{name: "zstd-compressed", hs: ttHandshake("e"), codec: wire.CodecZstd, steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { ttFeed(t, tc.hs, tc.codec, tc.steps) })
	}
}

// TestKVEventGaps: a batch whose seq does not follow the rank's previous
// one makes the router ask for a snapshot (its id is the batch's seq), and
// the batch is still applied; seqs count per rank.
func TestKVEventGaps(t *testing.T) {
	gpu := wire.TierGPU
	twoRanks := ttHandshake("e")
	twoRanks.DPRanks = 2
	cases := []struct {
		name  string
		hs    wire.Handshake
		steps []ttStep
	}{
		{name: "consecutive", hs: ttHandshake("e"), steps: []ttStep{{
			send: []wire.Message{ttBatch(1, 0, ttStored(gpu, 1)), ttBatch(2, 0, ttStored(gpu, 2)), ttBatch(3, 0, ttStored(gpu, 3))},
		}}},
		{name: "the first batch may start anywhere", hs: ttHandshake("e"), steps: []ttStep{{
			send: []wire.Message{ttBatch(57, 0, ttStored(gpu, 1)), ttBatch(58, 0, ttStored(gpu, 2))},
		}}},
		{name: "a lost batch", hs: ttHandshake("e"), steps: []ttStep{{
			send:     []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA[0])), ttBatch(3, 0, ttStored(gpu, ttChainA[1:]...))},
			requests: []uint32{3},
			holds:    []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}, {
			send: []wire.Message{ttBatch(4, 0, ttStored(gpu, 9))}, // follows the gap's batch: no second request
		}}},
		{name: "seq going back", hs: ttHandshake("e"), steps: []ttStep{{
			send:     []wire.Message{ttBatch(5, 0, ttStored(gpu, 1)), ttBatch(3, 0, ttStored(gpu, 2))},
			requests: []uint32{3},
		}}},
		{name: "per rank", hs: twoRanks, steps: []ttStep{{
			send: []wire.Message{ttBatch(1, 0, ttStored(gpu, 1)), ttBatch(1, 1, ttStored(gpu, 2)),
				ttBatch(2, 0, ttStored(gpu, 3)), ttBatch(2, 1, ttStored(gpu, 4))},
		}, {
			send:     []wire.Message{ttBatch(4, 1, ttStored(gpu, 5)), ttBatch(3, 0, ttStored(gpu, 6))},
			requests: []uint32{4},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { ttFeed(t, tc.hs, wire.CodecNone, tc.steps) })
	}
}

// TestSnapshots: an engine with the SNAPSHOT feature is asked for one on
// connecting; its chunks replace the rank's view when the last arrives,
// only that rank's, and later batches continue from the snapshot's seq.
func TestSnapshots(t *testing.T) {
	gpu, cpu := wire.TierGPU, wire.TierCPU
	snapHS := ttHandshake("e")
	snapHS.Features = wire.FeatureSnapshot
	twoRanks := snapHS
	twoRanks.DPRanks = 2
	cases := []struct {
		name  string
		hs    wire.Handshake
		codec wire.Codec
		steps []ttStep
	}{
		{name: "one chunk", hs: snapHS, steps: []ttStep{{
			send:  []wire.Message{ttSnap(10, 0, 0, true, ttStored(gpu, ttChainA...), ttStored(cpu, ttChainB...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}, {0, ttChainB, [3]uint32{0, 3, 0}}},
		}}},
		{name: "chunks count at the last", hs: snapHS, steps: []ttStep{{
			send:  []wire.Message{ttSnap(10, 0, 0, false, ttStored(gpu, ttChainA[:2]...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{}}},
		}, {
			send:  []wire.Message{ttSnap(10, 0, 1, true, ttStored(gpu, ttChainA[2]))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}}},
		{name: "replaces what batches said", hs: snapHS, steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainB...))},
			holds: []ttHolds{{0, ttChainB, [3]uint32{3, 0, 0}}},
		}, {
			send:  []wire.Message{ttSnap(1, 0, 0, true, ttStored(gpu, ttChainA...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}, {0, ttChainB, [3]uint32{}}},
		}}},
		{name: "an empty snapshot empties the rank", hs: snapHS, steps: []ttStep{{
			send:  []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...)), ttSnap(1, 0, 0, true)},
			holds: []ttHolds{{0, ttChainA, [3]uint32{}}},
		}}},
		{name: "one rank's snapshot leaves the other", hs: twoRanks, steps: []ttStep{{
			send: []wire.Message{ttBatch(1, 0, ttStored(gpu, ttChainA...)), ttBatch(1, 1, ttStored(gpu, ttChainA...)),
				ttSnap(1, 1, 0, true, ttStored(gpu, ttChainB...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}, {1, ttChainA, [3]uint32{}}, {1, ttChainB, [3]uint32{3, 0, 0}}},
		}}},
		{name: "batches continue from the snapshot's seq", hs: snapHS, steps: []ttStep{{
			send:  []wire.Message{ttSnap(10, 0, 0, true, ttStored(gpu, ttChainA[0])), ttBatch(11, 0, ttStored(gpu, ttChainA[1]))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{2, 0, 0}}},
		}, {
			send:     []wire.Message{ttBatch(13, 0, ttStored(gpu, ttChainA[2]))},
			requests: []uint32{13},
			holds:    []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}}},
		{name: "zstd-compressed chunks", hs: snapHS, codec: wire.CodecZstd, steps: []ttStep{{
			send:  []wire.Message{ttSnap(3, 0, 0, false, ttStored(gpu, ttChainA[0])), ttSnap(3, 0, 1, true, ttStored(gpu, ttChainA[1:]...))},
			holds: []ttHolds{{0, ttChainA, [3]uint32{3, 0, 0}}},
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { ttFeed(t, tc.hs, tc.codec, tc.steps) })
	}
}
