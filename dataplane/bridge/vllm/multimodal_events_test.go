package vllm_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
)

// The identifiers of testdata/tagged_mm_extra_keys.hex: kvgate content ids
// in hex.
const (
	mmX = "00112233445566778899aabbccddeeff"
	mmY = "ffeeddccbbaa99887766554433221100"
)

// TestMMKeysShapes: a block's items are read from the tuple and the typed
// form alike, next to the adapter's name and a first block's salt; a bare
// hash string (older vLLM, no offset) leaves its block with none, so it
// cannot be translated.
func TestMMKeysShapes(t *testing.T) {
	stored := func(parent vllm.Hash, lora string, keys ...[]vllm.MMKey) vllm.Event {
		ev := vllm.Event{Kind: vllm.BlockStored, Parent: parent, BlockSize: 1, Medium: "GPU", LoRAName: lora}
		for i, k := range keys {
			ev.BlockHashes = append(ev.BlockHashes, vllmtest.IntHash(uint64(10+i)))
			ev.TokenIDs = append(ev.TokenIDs, 1)
			ev.ExtraKeys = append(ev.ExtraKeys, vllm.ExtraMultimodal)
			if lora != "" {
				ev.ExtraKeys[i] |= vllm.ExtraLoRA
			}
			ev.MMKeys = append(ev.MMKeys, k)
		}
		return ev
	}
	for _, c := range []struct {
		name string
		ev   vllm.Event
	}{
		{"one item", stored("", "", []vllm.MMKey{{Identifier: mmX, Offset: 0}})},
		{"two items, one begun before", stored(vllmtest.IntHash(3), "", []vllm.MMKey{{Identifier: mmX, Offset: -200}, {Identifier: mmY, Offset: 0}})},
		{"adapter first", stored("", "sql", []vllm.MMKey{{Identifier: "sql:" + mmX, Offset: 5}}, []vllm.MMKey{{Identifier: "sql:" + mmX, Offset: -1}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := vllm.Batch{TS: 1, Events: []vllm.Event{c.ev}}
			for _, enc := range []vllmtest.Encoding{vllmtest.Tagged, vllmtest.PositionalCurrent} {
				got, err := vllm.DecodeBatch(vllmtest.EncodeBatch(enc, &b))
				if err != nil || !reflect.DeepEqual(*got, b) {
					t.Fatalf("encoding %d: %v\n%+v\nwant\n%+v", enc, err, got, b)
				}
			}
		})
	}
	// A bare string on a later block is an old multimodal hash: no offset.
	old, _ := msgpack.Marshal([]any{1.0, []any{[]any{"BlockStored", []any{1, 2}, nil, []any{1, 2}, 1, nil, "GPU", nil,
		[]any{nil, []any{"0123", []any{mmX, 0}}}}}})
	b, err := vllm.DecodeBatch(old)
	if err != nil || len(b.Events) != 1 || b.Events[0].Invalid != "" {
		t.Fatalf("%v %+v", err, b)
	}
	if ev := b.Events[0]; ev.ExtraKeys[1] != vllm.ExtraMultimodal || len(ev.MMKeys) != 2 || ev.MMKeys[1] != nil {
		t.Fatalf("a bare hash read as %+v %+v", ev.ExtraKeys, ev.MMKeys)
	}
	b, err = vllm.DecodeBatch(readHex(t, "tagged_typed_extra_keys.hex"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Events[0].MMKeys; len(got) != 3 || len(got[1]) != 1 || got[1][0] != (vllm.MMKey{Identifier: "h"}) {
		t.Fatalf("typed mm key read as %+v", got)
	}
}

// TestMMGoldenTranslates: the golden batch's adapter blocks, their images
// named "<adapter>:<kvgate id>" by a vLLM with tower-connector LoRA, get
// exactly the hashes kvgate's hasher gives that prompt with that image
// under the adapter's wire id; the later block, whose parent the
// translator never saw, is skipped rather than guessed.
func TestMMGoldenTranslates(t *testing.T) {
	b, err := vllm.DecodeBatch(readHex(t, "tagged_mm_extra_keys.hex"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tr := vllm.NewTranslator(h, []vllm.LoRA{{Name: "sql", VLLMID: 7, WireID: 3}})
	out := tr.Apply(0, b.Events)
	want, err := h.Hash(nil, []uint32{5, 9, 9, 9}, &kvstore.Keys{LoRAID: 3,
		MM: []kvstore.MMItem{{Offset: 1, Length: 3, Hash: 0x8899aabbccddeeff}}}) // mmX's low 64 bits
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].LoRAID != 3 || out[0].HasParent || !slices.Equal(out[0].Hashes.AppendTo(nil), want) {
		t.Fatalf("translated %+v, want one STORED of %x", out, want)
	}
	if s := tr.Skipped(); s != (vllm.Skipped{UnknownParent: 1}) {
		t.Fatalf("skipped %+v", s)
	}
}

// TestMMForeignIdentifiers: a block whose image is not named by a kvgate
// id (vLLM's own hash of an image another client sent, another adapter's
// prefix, hex in capitals) is counted as multimodal and skipped with the
// rest of its chain; the blocks before it are indexed.
func TestMMForeignIdentifiers(t *testing.T) {
	for _, c := range []struct{ name, id, lora string }{
		{"vllm's own hash", strings.Repeat("ab", 32), ""},
		{"another adapter's prefix", "law:" + mmX, "sql"},
		{"capitals", strings.ToUpper(mmY), ""},
		{"a prefix without an adapter", "sql:" + mmX, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := vllm.Event{Kind: vllm.BlockStored, BlockHashes: []vllm.Hash{vllmtest.IntHash(1), vllmtest.IntHash(2), vllmtest.IntHash(3)},
				TokenIDs: []uint32{1, 2, 9, 9, 9, 3}, BlockSize: 2, Medium: "GPU", LoRAName: c.lora,
				ExtraKeys: []vllm.Extra{0, vllm.ExtraMultimodal, vllm.ExtraMultimodal},
				MMKeys:    [][]vllm.MMKey{nil, {{Identifier: c.id, Offset: 0}}, {{Identifier: c.id, Offset: -2}}}}
			var loras []vllm.LoRA
			if c.lora != "" {
				loras = []vllm.LoRA{{Name: c.lora, WireID: 1}}
				for i := range ev.ExtraKeys {
					ev.ExtraKeys[i] |= vllm.ExtraLoRA
				}
			}
			b, err := vllm.DecodeBatch(vllmtest.EncodeBatch(vllmtest.Tagged, &vllm.Batch{TS: 1, Events: []vllm.Event{ev}}))
			if err != nil {
				t.Fatal(err)
			}
			h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 2, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			tr := vllm.NewTranslator(h, loras)
			out := tr.Apply(0, b.Events)
			if len(out) != 1 || out[0].Hashes.Len() != 1 {
				t.Fatalf("translated %+v, want the first block alone", out)
			}
			if s := tr.Skipped(); s != (vllm.Skipped{Multimodal: 2}) {
				t.Fatalf("skipped %+v", s)
			}
		})
	}
}

// BenchmarkTranslateImage: translating a 1,024-token prompt's BlockStored
// (64 blocks of 16) whose tokens 16..1015 are an image, against the same
// event without the image: HashBlock per block against one Chain.
func BenchmarkTranslateImage(b *testing.B) {
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 16, Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	for _, withImage := range []bool{false, true} {
		ev := vllm.Event{Kind: vllm.BlockStored, BlockSize: 16, Medium: "GPU", TokenIDs: prompt(1024)}
		for i := range 64 {
			ev.BlockHashes = append(ev.BlockHashes, vllmtest.IntHash(uint64(i+1)))
		}
		if withImage {
			ev.ExtraKeys, ev.MMKeys = make([]vllm.Extra, 64), make([][]vllm.MMKey, 64)
			for i := range 64 {
				if lo := 16 * i; lo < 1016 && lo+16 > 16 {
					ev.ExtraKeys[i], ev.MMKeys[i] = vllm.ExtraMultimodal, []vllm.MMKey{{Identifier: mmX, Offset: 16 - lo}}
				}
			}
		}
		b.Run(fmt.Sprintf("image=%v", withImage), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(4 * 1024)
			tr := vllm.NewTranslator(h, nil)
			for b.Loop() {
				if out := tr.Apply(0, []vllm.Event{ev}); len(out) != 1 || out[0].Hashes.Len() != 64 {
					b.Fatalf("translated %+v (skipped %+v)", out, tr.Skipped())
				}
			}
		})
	}
}
