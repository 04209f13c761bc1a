package kvstore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

// vllmBlockExtra is block i's extra keys computed the way vLLM's
// _gen_mm_extra_hash_keys does (vllm/v1/core/kv_cache_utils.py at
// 001cabc1be16a59a70d720ed61a13b678c060a18): walking the items from the
// first that may still overlap, each item with a token in the block gives
// (hash, offset - start_token_idx); the walk stops at an item that starts
// after the block or that the block does not finish.
func vllmBlockExtra(k *Keys, i, bs int) *BlockExtra {
	x := &BlockExtra{LoRAID: k.LoRAID}
	if i == 0 {
		x.CacheSalt = k.CacheSalt
	}
	start, end := i*bs, (i+1)*bs
	for _, it := range k.MM {
		off, n := int(it.Offset), int(it.Length)
		if end <= off {
			break // the block has not reached the item
		}
		if start >= off+n {
			continue // the block is past the item
		}
		x.MM = append(x.MM, BlockMM{Hash: it.Hash, RelOffset: int32(off - start)})
		if end < off+n {
			break // the item goes on past the block
		}
	}
	return x
}

// TestHashBlockMatchesHash: hashing a prompt block by block through
// HashBlock, each block with the extras vLLM would report for it, gives
// Hash's hashes for the whole prompt and its keys.
func TestHashBlockMatchesHash(t *testing.T) {
	const bs = 16
	h := mustHasher(t, bs)
	toks := seqTokens(bs * 8)
	cases := []struct {
		name string
		keys *Keys
	}{
		{"none", &Keys{}},
		{"one item over three blocks", &Keys{MM: []MMItem{{Offset: 5, Length: 40, Hash: 0xa}}}},
		{"two items in one block", &Keys{MM: []MMItem{{Offset: 17, Length: 3, Hash: 0xa}, {Offset: 24, Length: 4, Hash: 0xb}}}},
		{"an item from mid-block to the end of another", &Keys{MM: []MMItem{{Offset: 40, Length: 24, Hash: 0xc}}}},
		{"block-aligned item", &Keys{MM: []MMItem{{Offset: 32, Length: 32, Hash: 0xd}}}},
		{"the same image twice", &Keys{MM: []MMItem{{Offset: 3, Length: 20, Hash: 0xe}, {Offset: 23, Length: 20, Hash: 0xe}}}},
		{"straddling, then one inside the next block", &Keys{MM: []MMItem{{Offset: 10, Length: 10, Hash: 1}, {Offset: 21, Length: 2, Hash: 2}, {Offset: 23, Length: 30, Hash: 3}}}},
		{"lora, salt and images", &Keys{LoRAID: 4, CacheSalt: []byte("tenant"), MM: []MMItem{{Offset: 0, Length: 17, Hash: 9}, {Offset: 100, Length: 28, Hash: 9}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := h.Hash(nil, toks, c.keys)
			if err != nil {
				t.Fatal(err)
			}
			parent := h.Root()
			var got []uint64
			for i := range len(toks) / bs {
				if parent, err = h.HashBlock(parent, toks[i*bs:(i+1)*bs], vllmBlockExtra(c.keys, i, bs)); err != nil {
					t.Fatal(err)
				}
				got = append(got, parent)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("block by block %x\nwhole          %x", got, want)
			}
		})
	}
	if _, err := h.HashBlock(h.Root(), toks[:bs-1], nil); err == nil {
		t.Fatal("a partial block hashed")
	}
	x := vllmBlockExtra(cases[len(cases)-1].keys, 0, bs)
	if a := testing.AllocsPerRun(20, func() { _, _ = h.HashBlock(1, toks[:bs], x) }); a != 0 {
		t.Errorf("HashBlock: %v allocs", a)
	}
}

// TestHashMMPosition: an image's start relative to each block enters the
// block: the same image over the same tokens, one position later, changes
// every block it overlaps, and a different image changes the blocks from
// the one where it starts, none before.
func TestHashMMPosition(t *testing.T) {
	const bs = 16
	h := mustHasher(t, bs)
	toks := make([]uint32, 6*bs)
	for i := range toks {
		toks[i] = 151655 // every token an image placeholder
	}
	at := func(off uint32, hash uint64) []uint64 {
		hs, err := h.Hash(nil, toks, &Keys{MM: []MMItem{{Offset: off, Length: 40, Hash: hash}}})
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	// [20,60) and [21,61) start in block 1; later blocks differ through
	// their own keys (blocks 2, 3) or their parents (4, 5).
	base, shifted, other := at(20, 7), at(21, 7), at(20, 8)
	for i := range base {
		if (base[i] != shifted[i]) != (i >= 1) {
			t.Errorf("block %d: shifted image equal=%v", i, base[i] == shifted[i])
		}
		if (base[i] != other[i]) != (i >= 1) {
			t.Errorf("block %d: other image equal=%v", i, base[i] == other[i])
		}
	}
}

// BenchmarkHashBlock: one 16-token block with an image's key, as a bridge
// hashes each block of a vLLM event.
func BenchmarkHashBlock(b *testing.B) {
	h, _ := NewHasher(HashConfig{BlockSize: 16, Seed: 1, Model: "m"})
	toks := benchTokens(16)
	x := &BlockExtra{MM: []BlockMM{{Hash: 0xfeed, RelOffset: -3}}}
	b.ReportAllocs()
	var p uint64
	for b.Loop() {
		p, _ = h.HashBlock(p, toks, x)
	}
	_ = fmt.Sprint(p)
}

// TestHashMMLayout: block 1 of the golden case mm_relative is XXH3 of the
// bytes Hasher's doc draws, written out here: its parent, its tokens, and
// the straddling item's key with relative offset -1.
func TestHashMMLayout(t *testing.T) {
	h := mustHasher(t, 4)
	keys := &Keys{MM: []MMItem{{Offset: 1, Length: 2, Hash: 0xa}, {Offset: 3, Length: 6, Hash: 0xb}}}
	hs, err := h.Hash(nil, seqTokens(12), keys)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, hs[0])
	for tok := uint32(4); tok < 8; tok++ {
		b = binary.LittleEndian.AppendUint32(b, tok)
	}
	b = append(b, 0x03)
	b = binary.LittleEndian.AppendUint64(b, 0xb)
	b = binary.LittleEndian.AppendUint32(b, 0xffffffff) // int32 -1
	if got := xxh3.HashSeed(b, 0x6b76676174650001); got != hs[1] {
		t.Fatalf("block 1: %#x, the drawn layout hashes to %#x", hs[1], got)
	}
}
