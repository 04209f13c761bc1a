package vllm_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// readHex reads a testdata vector: hex bytes, # comments.
func readHex(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(strings.ReplaceAll(line, " ", ""))
		}
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGoldenBatches: the byte vectors, written by hand from the msgpack
// spec and msgspec's struct rules, decode to the events they describe, and
// the fake vLLM's encoder reproduces them byte for byte.
func TestGoldenBatches(t *testing.T) {
	cases := []struct {
		file string
		enc  vllmtest.Encoding
		want vllm.Batch
	}{
		{"positional_stored.hex", vllmtest.Positional, vllm.Batch{TS: 1.5, HasRank: true, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2)},
			TokenIDs: []uint32{10, 11, 12, 13}, BlockSize: 2, Medium: "GPU"}}}},
		{"positional_stored_v0.hex", -1, vllm.Batch{TS: 2, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(7)}, Parent: vllmtest.IntHash(3),
			TokenIDs: []uint32{1, 2}, BlockSize: 2, LoRAID: 5}, {Kind: vllm.AllBlocksCleared}}}},
		{"tagged_removed.hex", vllmtest.Tagged, vllm.Batch{TS: 1.5, DPRank: 1, HasRank: true, Events: []vllm.Event{{
			Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.BytesHash([]byte{0xde, 0xad, 0xbe, 0xef})}, Medium: "GPU"}}}},
		{"tagged_stored_current.hex", vllmtest.Tagged, vllm.Batch{TS: 1.5, HasRank: true, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.BytesHash([]byte{1})}, TokenIDs: []uint32{1, 2}, BlockSize: 2,
			LoRAID: 1, Medium: "GPU", LoRAName: "sql", ExtraKeys: []vllm.Extra{vllm.ExtraLoRA}, GroupIdx: 1,
			KVCacheSpecKind: "sliding_window", SlidingWindow: 128}}}},
		{"positional_current_trailing.hex", -1, vllm.Batch{TS: 2, DPRank: 3, HasRank: true, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(5)}, Parent: vllmtest.IntHash(4), TokenIDs: []uint32{7, 8},
			BlockSize: 2, Medium: "GPU", ExtraKeys: []vllm.Extra{0}, KVCacheSpecKind: "full_attention", Locality: "LOCAL"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(5)}, Medium: "GPU", GroupIdx: 1, Locality: "LOCAL"}}}},
		{"tagged_offload_cpu.hex", vllmtest.Tagged, vllm.Batch{TS: 3, Events: []vllm.Event{
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(0x102)}, TokenIDs: []uint32{1, 2}, BlockSize: 2, Medium: "GPU"},
			{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{cpuCopy}, Medium: "CPU"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{cpuCopy}, Medium: "CPU"}}}},
		{"tagged_extra_keys.hex", vllmtest.Tagged, vllm.Batch{TS: 1, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2), vllmtest.IntHash(3)},
			TokenIDs: []uint32{1, 2, 3}, BlockSize: 1, Medium: "GPU",
			ExtraKeys: []vllm.Extra{vllm.ExtraCacheSalt, vllm.ExtraMultimodal, vllm.ExtraPromptEmbeds},
			MMKeys:    [][]vllm.MMKey{nil, {{Identifier: "mm-hash"}}, nil}}}}},
		{"tagged_typed_extra_keys.hex", -1, vllm.Batch{TS: 1, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2), vllmtest.IntHash(3)},
			TokenIDs: []uint32{1, 2, 3}, BlockSize: 1, Medium: "GPU", LoRAName: "sql",
			ExtraKeys: []vllm.Extra{vllm.ExtraLoRA, vllm.ExtraLoRA | vllm.ExtraMultimodal, vllm.ExtraLoRA | vllm.ExtraUnknown},
			MMKeys:    [][]vllm.MMKey{nil, {{Identifier: "h"}}, nil}}, {
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(4), vllmtest.IntHash(5)},
			TokenIDs: []uint32{4, 5}, BlockSize: 1, Medium: "GPU", ExtraKeys: []vllm.Extra{vllm.ExtraCacheSalt, vllm.ExtraPromptEmbeds}}}}},
		{"tagged_mm_extra_keys.hex", vllmtest.Tagged, vllm.Batch{TS: 1, Events: []vllm.Event{{
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2)}, TokenIDs: []uint32{5, 9, 9, 9},
			BlockSize: 2, LoRAID: 7, LoRAName: "sql", Medium: "GPU", ExtraKeys: []vllm.Extra{vllm.ExtraLoRA | vllm.ExtraMultimodal, vllm.ExtraLoRA | vllm.ExtraMultimodal},
			MMKeys: [][]vllm.MMKey{{{Identifier: "sql:" + mmX, Offset: 1}}, {{Identifier: "sql:" + mmX, Offset: -1}}}}, {
			Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(4)}, Parent: vllmtest.IntHash(3), TokenIDs: []uint32{9, 9},
			BlockSize: 2, Medium: "GPU", ExtraKeys: []vllm.Extra{vllm.ExtraMultimodal}, MMKeys: [][]vllm.MMKey{{{Identifier: mmY, Offset: -34}}}}}}},
		{"tagged_bad_event.hex", -1, vllm.Batch{TS: 1, Events: []vllm.Event{{Kind: vllm.AllBlocksCleared},
			{Kind: vllm.BlockStored, Invalid: "vllm: KV event batch does not match the schema: block_size x"},
			{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(1)}, Medium: "GPU"}}}},
	}
	for _, c := range cases {
		raw := readHex(t, c.file)
		got, err := vllm.DecodeBatch(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if !reflect.DeepEqual(*got, c.want) {
			t.Fatalf("%s decoded\n%+v\nwant\n%+v", c.file, *got, c.want)
		}
		if c.enc >= 0 {
			if enc := vllmtest.EncodeBatch(c.enc, &c.want); !bytes.Equal(enc, raw) {
				t.Fatalf("%s: the fake's encoder wrote\n%x\nwant\n%x", c.file, enc, raw)
			}
		}
	}
}

// cpuCopy is the offloading connector's raw hash of the GPU block whose
// integer hash is 0x102 (its last 8 bytes).
var cpuCopy = vllmtest.BytesHash([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2})

// TestGoldenOffloadTranslates: the offloading golden batch indexes the GPU
// block in the CPU tier too, and the CPU removal takes it out of that tier
// only.
func TestGoldenOffloadTranslates(t *testing.T) {
	b, err := vllm.DecodeBatch(readHex(t, "tagged_offload_cpu.hex"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tr := vllm.NewTranslator(h, nil)
	out := tr.Apply(0, b.Events)
	want, _ := h.Hash(nil, []uint32{1, 2}, nil)
	if len(out) != 3 || out[1].Tier != wire.TierCPU || out[2].Kind != wire.EventRemoved || out[2].Tier != wire.TierCPU ||
		out[1].Hashes.AppendTo(nil)[0] != want[0] || out[2].Hashes.AppendTo(nil)[0] != want[0] || tr.Blocks(0) != 1 {
		t.Fatalf("translated %+v, %d blocks", out, tr.Blocks(0))
	}
	if s := tr.Skipped(); s != (vllm.Skipped{}) {
		t.Fatalf("skipped %+v", s)
	}
}

// TestBothEncodingsRoundTrip: every field the bridge reads survives both
// encodings, newer optional fields included.
func TestBothEncodingsRoundTrip(t *testing.T) {
	b := vllm.Batch{TS: 12.25, DPRank: 3, HasRank: true, Events: []vllm.Event{
		{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.BytesHash([]byte("h1")), vllmtest.BytesHash([]byte("h2"))},
			Parent: vllmtest.BytesHash([]byte("p")), TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2, LoRAID: 2,
			LoRAName: "sql", Medium: "CPU", ExtraKeys: []vllm.Extra{vllm.ExtraLoRA, vllm.ExtraLoRA | vllm.ExtraMultimodal}, GroupIdx: 1,
			MMKeys:          [][]vllm.MMKey{nil, {{Identifier: mmX, Offset: -1}}},
			KVCacheSpecKind: "sliding_window", SlidingWindow: 4096, Locality: "LOCAL", Ownership: "fs"},
		{Kind: vllm.BlockRemoved, BlockHashes: []vllm.Hash{vllmtest.IntHash(1 << 63)}, Medium: "GPU", GroupIdx: 2, Locality: "REMOTE"},
		{Kind: vllm.AllBlocksCleared},
	}}
	for _, enc := range []vllmtest.Encoding{vllmtest.Tagged, vllmtest.PositionalCurrent} {
		got, err := vllm.DecodeBatch(vllmtest.EncodeBatch(enc, &b))
		if err != nil || !reflect.DeepEqual(*got, b) {
			t.Fatalf("encoding %d: %v\n%+v\n%+v", enc, err, got, b)
		}
	}
	// The positional encoding predates lora_name, extra_keys and group_idx.
	old := b
	old.Events = []vllm.Event{b.Events[0], b.Events[1], b.Events[2]}
	old.Events[0].LoRAName, old.Events[0].ExtraKeys, old.Events[0].MMKeys, old.Events[0].GroupIdx = "", nil, nil, 0
	old.Events[1].GroupIdx, old.Events[1].Locality = 0, ""
	old.Events[0].Locality, old.Events[0].Ownership = "", ""
	old.Events[0].KVCacheSpecKind, old.Events[0].SlidingWindow = "", 0
	got, err := vllm.DecodeBatch(vllmtest.EncodeBatch(vllmtest.Positional, &old))
	if err != nil || !reflect.DeepEqual(*got, old) {
		t.Fatalf("positional: %v\n%+v\n%+v", err, got, old)
	}
}

func TestMalformedBatches(t *testing.T) {
	for _, raw := range [][]byte{
		{}, {0xc1}, {0x91, 0x01}, {0x92, 0x01, 0x02},
	} {
		if _, err := vllm.DecodeBatch(raw); err == nil {
			t.Fatalf("%x decoded", raw)
		}
	}
}

// FuzzDecodeBatch: arbitrary bytes never panic. Seeded with the golden
// vectors.
func FuzzDecodeBatch(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.hex")
	for _, name := range files {
		f.Add(readHex(f, filepath.Base(name)))
	}
	for _, enc := range []vllmtest.Encoding{vllmtest.Positional, vllmtest.Tagged} {
		f.Add(vllmtest.EncodeBatch(enc, &vllm.Batch{TS: 1, Events: []vllm.Event{{Kind: vllm.BlockStored,
			BlockHashes: []vllm.Hash{vllmtest.IntHash(5)}, TokenIDs: []uint32{1, 2}, BlockSize: 2}}}))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { _, _ = vllm.DecodeBatch(raw) })
}

// TestTypedExtraKeysTranslate: an adapter named by a typed LoRAKey is
// indexed under its wire id; the blocks after a typed key the router
// cannot know (an image, a legacy key, a salt, prompt embeddings) are
// skipped and counted by kind, as bare keys are.
func TestTypedExtraKeysTranslate(t *testing.T) {
	b, err := vllm.DecodeBatch(readHex(t, "tagged_typed_extra_keys.hex"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 1, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tr := vllm.NewTranslator(h, []vllm.LoRA{{Name: "sql", WireID: 3}})
	evs := tr.Apply(0, b.Events)
	if len(evs) != 1 || evs[0].LoRAID != 3 || evs[0].Hashes.Len() != 1 {
		t.Fatalf("translated %+v", evs)
	}
	if s := tr.Skipped(); s.Multimodal != 2 || s.CacheSalt != 2 || s.ExtraKeys != 0 {
		t.Fatalf("skipped %+v", s)
	}
}
