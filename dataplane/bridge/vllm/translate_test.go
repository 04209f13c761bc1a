package vllm_test

import (
	"slices"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

func hasher(t *testing.T) *kvstore.Hasher {
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 4, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func prompt(n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(1000 + i*3)
	}
	return p
}

// TestTranslateChain: a prompt stored in two events, the second chained to
// the first by its engine parent hash, gets exactly the kvgate hashes the
// router computes for the whole prompt; removal by engine hash removes the
// right kvgate hash; an unknown parent is skipped and counted.
func TestTranslateChain(t *testing.T) {
	h := hasher(t)
	tr := vllm.NewTranslator(h, []vllm.LoRA{{Name: "sql", VLLMID: 9, WireID: 1}})
	p := prompt(24) // 6 blocks
	eng := []vllm.Hash{vllmtest.IntHash(11), vllmtest.IntHash(12), vllmtest.IntHash(13), vllmtest.IntHash(14), vllmtest.IntHash(15), vllmtest.IntHash(16)}
	out := tr.Apply(0, []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: eng[:2], TokenIDs: p[:8], BlockSize: 4},
		{Kind: vllm.BlockStored, BlockHashes: eng[2:], Parent: eng[1], TokenIDs: p[8:], BlockSize: 4, Medium: "GPU"},
	})
	want, _ := h.Hash(nil, p, nil)
	var got []uint64
	for _, e := range out {
		got = append(got, e.Hashes.AppendTo(nil)...)
	}
	if !slices.Equal(got, want) || !out[1].HasParent || out[1].Parent != want[1] {
		t.Fatalf("translated %x (parent %x), want %x", got, out[1].Parent, want)
	}
	out = tr.Apply(0, []vllm.Event{{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{eng[5], vllmtest.IntHash(99)}}})
	if len(out) != 1 || out[0].Kind != wire.EventRemoved || !slices.Equal(out[0].Hashes.AppendTo(nil), want[5:]) {
		t.Fatalf("removal: %+v", out)
	}
	if tr.Apply(0, []vllm.Event{{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(50)},
		Parent: vllmtest.IntHash(49), TokenIDs: p[:4], BlockSize: 4}}) != nil || tr.Skipped().UnknownParent != 1 {
		t.Fatalf("unknown parent: skipped %+v", tr.Skipped())
	}
	if tr.Blocks(0) != 5 || len(tr.Snapshot(0)) != 5 {
		t.Fatalf("blocks %d, snapshot %d", tr.Blocks(0), len(tr.Snapshot(0)))
	}

	// LoRA by name and by vLLM id hash like the router's LoRA keys;
	// unknown adapters, other attention groups and extra keys are skipped.
	wantLoRA, _ := h.Hash(nil, p[:8], &kvstore.Keys{LoRAID: 1})
	for _, ev := range []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"a1", "a2"}, TokenIDs: p[:8], BlockSize: 4, LoRAName: "sql"},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"b1", "b2"}, TokenIDs: p[:8], BlockSize: 4, LoRAID: 9},
	} {
		out := tr.Apply(1, []vllm.Event{ev})
		if len(out) != 1 || out[0].LoRAID != 1 || !slices.Equal(out[0].Hashes.AppendTo(nil), wantLoRA) {
			t.Fatalf("LoRA event %+v: %+v", ev, out)
		}
	}
	tr.Apply(1, []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"c1"}, TokenIDs: p[:4], BlockSize: 4, LoRAName: "other"},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"d1"}, TokenIDs: p[:4], BlockSize: 4, GroupIdx: 1},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{"e1", "e2"}, TokenIDs: p[:8], BlockSize: 4, ExtraKeys: []vllm.Extra{0, vllm.ExtraMultimodal}},
	})
	if s := tr.Skipped(); s.UnknownLoRA != 1 || s.OtherGroup != 1 || s.Multimodal != 1 {
		t.Fatalf("skipped %+v", s)
	}

	// CPU tier, then a clear: every tier forgotten.
	out = tr.Apply(0, []vllm.Event{{Kind: vllm.BlockStored, BlockHashes: eng[:1], TokenIDs: p[:4], BlockSize: 4, Medium: "CPU"}})
	if len(out) != 1 || out[0].Tier != wire.TierCPU {
		t.Fatalf("CPU store: %+v", out)
	}
	out = tr.Apply(0, []vllm.Event{{Kind: vllm.AllBlocksCleared}})
	if len(out) != wire.NumTiers || tr.Blocks(0) != 0 {
		t.Fatalf("clear: %+v, %d blocks left", out, tr.Blocks(0))
	}
}

// TestTranslateHybridGroups: vLLM's per-group events of a hybrid model
// (golden frames: both groups store one engine hash, then the Mamba group
// evicts its state), in either order of the groups. Configured with the
// groups it announces, the bridge forwards each group as itself, and the
// router's index keeps the full group's block when the Mamba group's
// leaves; not configured, it forwards only the full-attention group, as
// group 0, wherever vLLM put it. Either way no group's removal takes
// another's block.
func TestTranslateHybridGroups(t *testing.T) {
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	kv, _ := h.Hash(nil, []uint32{1, 2}, nil)
	for _, c := range []struct {
		file       string
		full, mamb uint16
	}{{"tagged_hybrid_mamba_first.hex", 1, 0}, {"tagged_hybrid_full_first.hex", 0, 1}} {
		b, err := vllm.DecodeBatch(readHex(t, c.file))
		if err != nil {
			t.Fatal(err)
		}
		groups := make([]wire.Group, 2)
		groups[c.full] = wire.Group{Kind: wire.GroupFull, BlockSize: 2}
		groups[c.mamb] = wire.Group{Kind: wire.GroupMamba, BlockSize: 2}
		for _, configured := range []bool{true, false} {
			tr := vllm.NewTranslator(h, nil)
			var ix []kvstore.Group
			if configured {
				tr.SetGroups(groups)
				for _, g := range groups {
					kg, _ := kvstore.GroupOf(kvstore.GroupKind(g.Kind), int(g.BlockSize), 0, 2)
					ix = append(ix, kg)
				}
			}
			out := tr.Apply(0, b.Events)
			index := kvstore.New(kvstore.Options{})
			slots, _ := index.AddEngine(kvstore.EngineConfig{ID: "e", Groups: ix})
			if err := index.Apply(slots[0], kvEvents(out)); err != nil {
				t.Fatalf("%s, configured %v: %v (events %+v)", c.file, configured, err, out)
			}
			held := map[int]uint64{}
			for _, es := range index.Stats().Engines {
				held[es.Group] += es.Blocks[kvstore.TierGPU]
			}
			fullGroup := 0 // not configured: the full group is group 0
			if configured {
				fullGroup = int(c.full)
			}
			if held[fullGroup] != 1 || held[1-fullGroup] != 0 {
				t.Fatalf("%s, configured %v: blocks held per group %v, want the full group's (%d) 1 and none else; events %+v",
					c.file, configured, held, fullGroup, out)
			}
			if !configured {
				m := make([]kvstore.Match, 1)
				if index.Match(kv, slots, m); m[0].Depth() != 1 {
					t.Fatalf("%s: the full group's block is not matched (%+v)", c.file, m[0])
				}
			}
			// The full group's own removal still finds its block: the
			// tables are the groups', so the Mamba group's took only its own.
			rm := []vllm.Event{{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{b.Events[0].BlockHashes[0]}, Medium: "GPU", GroupIdx: int(c.full)}}
			if err := index.Apply(slots[0], kvEvents(tr.Apply(0, rm))); err != nil {
				t.Fatal(err)
			}
			if st := index.Stats(); st.Engines[0].Blocks[kvstore.TierGPU]+st.Engines[len(st.Engines)-1].Blocks[kvstore.TierGPU] != 0 {
				t.Fatalf("%s, configured %v: the full group's removal left blocks %+v", c.file, configured, st.Engines)
			}
			if !configured {
				if s := tr.Skipped(); s.OtherGroup != 2 {
					t.Fatalf("%s: %d Mamba blocks skipped, want 2 (its store and its removal)", c.file, s.OtherGroup)
				}
			}
		}
	}
}

// TestTranslateGroupKindRefused: an event whose kind contradicts the group
// it names is skipped and counted, not indexed under that group.
func TestTranslateGroupKindRefused(t *testing.T) {
	h, _ := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
	tr := vllm.NewTranslator(h, nil)
	tr.SetGroups([]wire.Group{{Kind: wire.GroupFull, BlockSize: 2}})
	out := tr.Apply(0, []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, KVCacheSpecKind: "mamba"},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(2)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, GroupIdx: 3},
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, KVCacheSpecKind: "full_attention"},
	})
	if s := tr.Skipped(); len(out) != 1 || s.GroupKind != 1 || s.OtherGroup != 1 {
		t.Fatalf("events %+v, skipped %+v: want one event, one wrong kind, one unknown group", out, s)
	}
}

// kvEvents converts wire events as the router's pool does.
func kvEvents(evs []wire.Event) []kvstore.Event {
	out := make([]kvstore.Event, len(evs))
	for i, ev := range evs {
		out[i] = kvstore.Event{Kind: kvstore.EventKind(ev.Kind), Tier: kvstore.Tier(ev.Tier), Group: ev.Group,
			HasParent: ev.HasParent, Parent: ev.Parent, Hashes: ev.Hashes.AppendTo(nil)}
	}
	return out
}

func TestParseGroups(t *testing.T) {
	gs, err := vllm.ParseGroups("sliding_window:128, full, mamba@64", 16)
	want := []wire.Group{{Kind: wire.GroupSlidingWindow, BlockSize: 16, Window: 128}, {Kind: wire.GroupFull, BlockSize: 16},
		{Kind: wire.GroupMamba, BlockSize: 64}}
	if err != nil || !slices.Equal(gs, want) {
		t.Fatalf("got %+v, %v; want %+v", gs, err, want)
	}
	for _, bad := range []string{"sparse", "sliding_window", "full:64", "mamba@24", "full@x"} {
		if _, err := vllm.ParseGroups(bad, 16); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
