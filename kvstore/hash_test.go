package kvstore

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// TestXXH3Reference pins the xxh3 implementation to the reference algorithm:
// XXH3_64bits of the empty input is 0x2D06800538D394C2 (xxHash's own test).
func TestXXH3Reference(t *testing.T) {
	if got := xxh3.HashSeed(nil, 0); got != 0x2D06800538D394C2 {
		t.Fatalf("XXH3_64bits(\"\") = %#x", got)
	}
}

func mustHasher(t testing.TB, bs int) *Hasher {
	h, err := NewHasher(HashConfig{BlockSize: bs, Seed: 0x6b76676174650001, Model: "Qwen/Qwen3-8B"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func seqTokens(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i)
	}
	return ids
}

// TestHashGolden: the same tokens and keys give the same hashes on every
// machine; engines in other languages check their hasher against this file.
func TestHashGolden(t *testing.T) {
	h := mustHasher(t, 4)
	cases := []struct {
		name string
		toks []uint32
		keys *Keys
	}{
		{"plain", seqTokens(10), nil},
		{"lora", seqTokens(10), &Keys{LoRAID: 7}},
		{"salt", seqTokens(10), &Keys{CacheSalt: []byte("tenant-a")}},
		{"mm", seqTokens(12), &Keys{MM: []MMItem{{Offset: 2, Length: 5, Hash: 0xfeedface}}}},
		{"all", seqTokens(12), &Keys{LoRAID: 7, CacheSalt: []byte("s"), MM: []MMItem{{Offset: 0, Length: 1, Hash: 1}, {Offset: 3, Length: 2, Hash: 2}}}},
		// Two items in block 0, the second going on through blocks 1 and 2
		// (relative offsets 1, 3; -1; -5).
		{"mm_relative", seqTokens(12), &Keys{MM: []MMItem{{Offset: 1, Length: 2, Hash: 0xa}, {Offset: 3, Length: 6, Hash: 0xb}}}},
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# kvstore block hashes: block_size 4, seed 0x6b76676174650001, model \"Qwen/Qwen3-8B\"\n")
	fmt.Fprintf(&sb, "# root %#016x\n", h.Root())
	for _, c := range cases {
		hs, err := h.Hash(nil, c.toks, c.keys)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s tokens=%v keys=%+v\n", c.name, c.toks, c.keys)
		for i, v := range hs {
			fmt.Fprintf(&sb, "  block %d %#016x\n", i, v)
		}
	}
	path := filepath.Join("testdata", "hash_golden.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if sb.String() != string(want) {
		t.Fatalf("hashes differ from %s:\n%s", path, sb.String())
	}
}

// TestHashChanges: changing a token, the order, the LoRA or the salt changes
// every hash from the first differing block on, and none before it.
func TestHashChanges(t *testing.T) {
	h := mustHasher(t, 16)
	base := seqTokens(16 * 8)
	ref, _ := h.Hash(nil, base, nil)
	if len(ref) != 8 {
		t.Fatalf("%d blocks", len(ref))
	}
	check := func(name string, got []uint64, firstDiff int) {
		t.Helper()
		for i := range ref {
			if (i < firstDiff) != (got[i] == ref[i]) {
				t.Fatalf("%s: block %d equal=%v, first differing block is %d", name, i, got[i] == ref[i], firstDiff)
			}
		}
	}
	for _, pos := range []int{0, 17, 100, 127} {
		mod := append([]uint32(nil), base...)
		mod[pos]++
		got, _ := h.Hash(nil, mod, nil)
		check(fmt.Sprintf("token %d", pos), got, pos/16)
	}
	swapped := append([]uint32(nil), base...)
	swapped[40], swapped[41] = swapped[41], swapped[40]
	got, _ := h.Hash(nil, swapped, nil)
	check("swap", got, 2)
	got, _ = h.Hash(nil, base, &Keys{LoRAID: 1})
	check("lora", got, 0)
	got, _ = h.Hash(nil, base, &Keys{CacheSalt: []byte("x")})
	check("salt", got, 0)
	got, _ = h.Hash(nil, base, &Keys{MM: []MMItem{{Offset: 70, Length: 20, Hash: 9}}})
	check("mm", got, 4)
	other, _ := NewHasher(HashConfig{BlockSize: 16, Seed: 0x6b76676174650001, Model: "other"})
	got, _ = other.Hash(nil, base, nil)
	check("model", got, 0)
}

// TestHashIncremental: hashing a prefix gives a prefix of the hashes, and
// Extend continues from there to the same result.
func TestHashIncremental(t *testing.T) {
	h := mustHasher(t, 16)
	keys := &Keys{LoRAID: 3, CacheSalt: []byte("t"), MM: []MMItem{{Offset: 20, Length: 40, Hash: 5}}}
	toks := seqTokens(16*10 + 7)
	full, _ := h.Hash(nil, toks, keys)
	if len(full) != 10 {
		t.Fatalf("%d blocks, partial block must not be hashed", len(full))
	}
	for n := 0; n <= len(toks); n += 5 {
		prefix, err := h.Hash(nil, toks[:n], keys)
		if err != nil && n >= 60 {
			t.Fatal(err)
		}
		if err != nil {
			continue // mm item outside the shorter prefix
		}
		for i := range prefix {
			if prefix[i] != full[i] {
				t.Fatalf("prefix %d: block %d differs", n, i)
			}
		}
		ext, _ := h.Extend(append([]uint64(nil), prefix...), toks, keys)
		for i := range full {
			if ext[i] != full[i] {
				t.Fatalf("extend from %d blocks: block %d differs", len(prefix), i)
			}
		}
	}
	le, _ := h.ExtendLE(nil, uint32Bytes(toks), keys)
	if fmt.Sprint(le) != fmt.Sprint(full) {
		t.Fatal("ExtendLE differs from Extend")
	}
}

func TestHashBadKeys(t *testing.T) {
	h := mustHasher(t, 16)
	for _, k := range []*Keys{
		{MM: []MMItem{{Offset: 10, Length: 100}}},
		{MM: []MMItem{{Offset: 5, Length: 1}, {Offset: 1, Length: 1}}},
		{MM: []MMItem{{Offset: 5, Length: 0}}},
		{MM: []MMItem{{Offset: 5, Length: 4}, {Offset: 8, Length: 1}}}, // overlapping
		{CacheSalt: make([]byte, 70000)},
	} {
		if _, err := h.Hash(nil, seqTokens(32), k); err == nil {
			t.Errorf("keys %+v accepted", k.MM)
		}
	}
	if _, err := NewHasher(HashConfig{BlockSize: 0}); err == nil {
		t.Error("block size 0 accepted")
	}
}

func TestHashNoAllocs(t *testing.T) {
	h := mustHasher(t, 16)
	toks := seqTokens(8192)
	keys := &Keys{LoRAID: 1, CacheSalt: []byte("x")}
	dst := make([]uint64, 0, 512)
	if a := testing.AllocsPerRun(20, func() { dst, _ = h.Hash(dst, toks, nil) }); a != 0 {
		t.Errorf("plain: %v allocs", a)
	}
	if a := testing.AllocsPerRun(20, func() { dst, _ = h.Hash(dst, toks, keys) }); a != 0 {
		t.Errorf("keyed: %v allocs", a)
	}
}

// TestChain: hashing a prompt in pieces, each continuing from the last
// hash of the previous piece, gives the hashes of hashing it whole, with
// and without LoRA and salt.
func TestChain(t *testing.T) {
	h, err := NewHasher(HashConfig{BlockSize: 4, Seed: 9, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]uint32, 40)
	for i := range tokens {
		tokens[i] = uint32(i * 7)
	}
	for _, keys := range []*Keys{nil, {LoRAID: 3}, {CacheSalt: []byte("tenant")}, {LoRAID: 2, CacheSalt: []byte("x")}} {
		whole, _ := h.Hash(nil, tokens, keys)
		got, err := h.Chain(nil, 0, false, tokens[:12], keys)
		if err != nil {
			t.Fatal(err)
		}
		got, _ = h.Chain(got, got[len(got)-1], true, tokens[12:20], keys)
		got, _ = h.Chain(got, got[len(got)-1], true, tokens[20:], keys)
		if !slices.Equal(got, whole) {
			t.Fatalf("keys %+v: chained %x, whole %x", keys, got, whole)
		}
	}
	if _, err := h.Chain(nil, 1, true, tokens, &Keys{MM: []MMItem{{Hash: 1, Offset: 0, Length: 4}}}); err == nil {
		t.Fatal("multimodal continuation accepted")
	}
}

// TestHashShortMatchesXXH3: hashShort is XXH3 of parent ‖ tok for every
// length it takes, not only whole tokens.
func TestHashShortMatchesXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 8+hashShortMax)
	for n := hashShortMin; n <= hashShortMax; n++ {
		for range 200 {
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			parent, seed := rng.Uint64(), rng.Uint64()
			binary.LittleEndian.PutUint64(buf, parent)
			if got, want := hashShort(parent, buf[8:8+n], seed), xxh3.HashSeed(buf[:8+n], seed); got != want {
				t.Fatalf("%d token bytes: %#x, want %#x", n, got, want)
			}
		}
	}
}
