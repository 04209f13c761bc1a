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
