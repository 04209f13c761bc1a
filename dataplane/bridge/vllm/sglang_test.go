package vllm_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// SGLang's block hashes in the vectors: hash_str_to_int64 gives signed
// int64s, sglNeg is -0x2233445566778899 as its 64 bits.
var (
	sglPos = vllmtest.IntHash(0x1122334455667788)
	sglNeg = vllmtest.IntHash(0xddccbbaa99887767)
)

// TestSGLangGoldenBatches: batches written by hand from SGLang's
// kv_events.py (each vector names the version) decode to the events they
// describe (see sglang.go for how SGLang differs from vLLM).
func TestSGLangGoldenBatches(t *testing.T) {
	cases := []struct {
		file string
		want vllm.Batch
	}{
		{"sglang_v0_pages.hex", vllm.Batch{TS: 1.5, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglPos}, TokenIDs: []uint32{1, 2}, BlockSize: 2},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglNeg}, Parent: sglPos, TokenIDs: []uint32{3, 4}, BlockSize: 2},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{sglNeg}},
			{Kind: vllm.AllBlocksCleared}}}},
		{"sglang_rank.hex", vllm.Batch{TS: 2, DPRank: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(5)}, TokenIDs: []uint32{7, 8}, BlockSize: 2},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(5)}}}}},
		{"sglang_medium.hex", vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglPos}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglPos}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "CPU_PINNED"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{sglPos}, Medium: "CPU_PINNED"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{sglPos}, Medium: "GPU"}}}},
		{"sglang_salt.hex", vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglPos}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU",
				ExtraKeys: []vllm.Extra{vllm.ExtraCacheSalt}},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(9)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"}}}},
		{"sglang_tagged.hex", vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(9)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(11)}, TokenIDs: []uint32{1, 2}, BlockSize: 2,
				ExtraKeys: []vllm.Extra{vllm.ExtraCacheSalt}},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(9)}, Medium: "GPU"}}}},
		{"sglang_bigram.hex", vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, Invalid: "vllm: KV event batch does not match the schema: token id [1 2]"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(9)}, Medium: "GPU"}}}},
		{"sglang_page1.hex", vllm.Batch{TS: 1, HasRank: true, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1)}, TokenIDs: []uint32{5}, BlockSize: 1, Medium: "GPU"},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(2)}, Parent: vllmtest.IntHash(1), TokenIDs: []uint32{6},
				BlockSize: 1, Medium: "GPU"}}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			got, err := vllm.DecodeBatch(readHex(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, c.want) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", *got, c.want)
			}
		})
	}
}

// sglangApply decodes a vector and translates it with a kvgate hasher of
// blockSize tokens.
func sglangApply(t *testing.T, file string, blockSize int) (*kvstore.Hasher, *vllm.Translator, []wire.Event) {
	t.Helper()
	b, err := vllm.DecodeBatch(readHex(t, file))
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: blockSize, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tr := vllm.NewTranslator(h, nil)
	return h, tr, tr.Apply(b.DPRank, b.Events)
}

func eventHashes(evs []wire.Event) [][]uint64 {
	var out [][]uint64
	for _, e := range evs {
		out = append(out, e.Hashes.AppendTo(nil))
	}
	return out
}

// TestSGLangTranslates: SGLang's per-page events, chained by their int64
// parent hashes, become exactly the kvgate hashes the router computes for
// the prompt when --block-size is SGLang's page size; removals and clears
// follow; host-tier copies land in the CPU tier; salted pages and bigram
// pages are skipped and counted; a page size other than --block-size
// indexes nothing rather than wrong hashes.
func TestSGLangTranslates(t *testing.T) {
	t.Run("pages", func(t *testing.T) {
		h, tr, out := sglangApply(t, "sglang_v0_pages.hex", 2)
		want, _ := h.Hash(nil, []uint32{1, 2, 3, 4}, nil)
		if len(out) != 3+wire.NumTiers || out[0].Kind != wire.EventStored || out[0].HasParent ||
			!out[1].HasParent || out[1].Parent != want[0] || out[2].Kind != wire.EventRemoved || out[3].Kind != wire.EventCleared {
			t.Fatalf("translated %+v", out)
		}
		if got := eventHashes(out[:3]); !slices.Equal(got[0], want[:1]) || !slices.Equal(got[1], want[1:]) || !slices.Equal(got[2], want[1:]) {
			t.Fatalf("hashes %x, want %x", got, want)
		}
		if tr.Blocks(0) != 0 || tr.Skipped() != (vllm.Skipped{}) {
			t.Fatalf("%d blocks left, skipped %+v", tr.Blocks(0), tr.Skipped())
		}
	})
	t.Run("rank", func(t *testing.T) {
		_, tr, out := sglangApply(t, "sglang_rank.hex", 2)
		if len(out) != 2 || out[1].Kind != wire.EventRemoved || tr.Blocks(1) != 0 {
			t.Fatalf("translated %+v, %d blocks on rank 1", out, tr.Blocks(1))
		}
	})
	t.Run("medium", func(t *testing.T) {
		h, tr, out := sglangApply(t, "sglang_medium.hex", 2)
		want, _ := h.Hash(nil, []uint32{1, 2}, nil)
		kinds := []struct {
			kind wire.EventKind
			tier wire.Tier
		}{{wire.EventStored, wire.TierGPU}, {wire.EventStored, wire.TierCPU}, {wire.EventRemoved, wire.TierCPU}, {wire.EventRemoved, wire.TierGPU}}
		if len(out) != len(kinds) {
			t.Fatalf("translated %+v", out)
		}
		for i, k := range kinds {
			if out[i].Kind != k.kind || out[i].Tier != k.tier || !slices.Equal(out[i].Hashes.AppendTo(nil), want) {
				t.Fatalf("event %d: %+v, want %v in tier %v of %x", i, out[i], k.kind, k.tier, want)
			}
		}
		if tr.Blocks(0) != 0 || tr.Skipped() != (vllm.Skipped{}) {
			t.Fatalf("%d blocks left, skipped %+v", tr.Blocks(0), tr.Skipped())
		}
	})
	for _, file := range []string{"sglang_salt.hex", "sglang_tagged.hex"} {
		t.Run(file, func(t *testing.T) {
			h, tr, out := sglangApply(t, file, 2)
			want, _ := h.Hash(nil, []uint32{1, 2}, nil)
			if len(out) == 0 || out[0].Kind != wire.EventStored || !slices.Equal(out[0].Hashes.AppendTo(nil), want) {
				t.Fatalf("translated %+v", out)
			}
			if s := tr.Skipped(); s.CacheSalt != 1 || s.Undecodable != 0 {
				t.Fatalf("skipped %+v", s)
			}
		})
	}
	t.Run("bigram", func(t *testing.T) {
		_, tr, out := sglangApply(t, "sglang_bigram.hex", 2)
		if s := tr.Skipped(); len(out) != 0 || s.Undecodable != 1 || s.UnknownBlock != 1 {
			t.Fatalf("translated %+v, skipped %+v", out, s)
		}
	})
	t.Run("page size", func(t *testing.T) {
		h, _, out := sglangApply(t, "sglang_page1.hex", 1)
		want, _ := h.Hash(nil, []uint32{5, 6}, nil)
		if got := eventHashes(out); len(got) != 2 || !slices.Equal(got[0], want[:1]) || !slices.Equal(got[1], want[1:]) {
			t.Fatalf("block size 1: %x, want %x", got, want)
		}
		_, tr, out := sglangApply(t, "sglang_page1.hex", 2)
		if s := tr.Skipped(); len(out) != 0 || tr.Blocks(0) != 0 || s.UnknownBlock != 1 || s.UnknownParent != 1 {
			t.Fatalf("block size 2: translated %+v, skipped %+v", out, s)
		}
	})
	t.Run("host copy without tokens", func(t *testing.T) {
		// A hierarchical-cache event that names a page by its hash alone
		// (no token ids) is the page's copy in that tier.
		h, _ := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
		tr := vllm.NewTranslator(h, nil)
		out := tr.Apply(0, []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglNeg}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{sglNeg}, BlockSize: 2, Medium: "CPU_PINNED"},
		})
		want, _ := h.Hash(nil, []uint32{1, 2}, nil)
		if len(out) != 2 || out[1].Tier != wire.TierCPU || !slices.Equal(out[1].Hashes.AppendTo(nil), want) {
			t.Fatalf("translated %+v", out)
		}
	})
}
