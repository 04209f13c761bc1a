package kvstore

import (
	"fmt"
	"testing"
)

func benchTokens(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i) * 2654435761 % 151643
	}
	return ids
}

func BenchmarkHash8192(b *testing.B) {
	toks := benchTokens(8192)
	for _, bs := range []int{16, 64} {
		b.Run(fmt.Sprintf("block=%d", bs), func(b *testing.B) {
			h, _ := NewHasher(HashConfig{BlockSize: bs, Seed: 1, Model: "m"})
			dst := make([]uint64, 0, 8192/bs)
			b.SetBytes(int64(4 * len(toks)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = h.Hash(dst, toks, nil)
			}
		})
	}
	b.Run("block=16/lora+salt", func(b *testing.B) {
		h, _ := NewHasher(HashConfig{BlockSize: 16, Seed: 1, Model: "m"})
		keys := &Keys{LoRAID: 3, CacheSalt: []byte("tenant")}
		dst := make([]uint64, 0, 512)
		b.SetBytes(int64(4 * len(toks)))
		b.ReportAllocs()
		for b.Loop() {
			dst, _ = h.Hash(dst, toks, keys)
		}
	})
}
