package kvstore

import (
	"encoding/binary"
	"math/bits"
)

// hashShort returns xxh3.HashSeed(p, seed) for the block input p = parent
// as 8 little-endian bytes followed by tok, when 64 < len(p) <= 96 (blocks
// of 15 to 22 tokens, among them the common 16). It is XXH3's 65-96 byte
// case written out, reading the parent from a register and the tokens
// where they lie, so the hot path neither copies each block into a buffer
// nor waits for the parent to be stored and loaded back, and needs no
// call or length dispatch. TestHashShortMatchesXXH3 holds it bit-exact.
func hashShort(parent uint64, tok []byte, seed uint64) uint64 {
	n := len(tok) // len(p) is 8+n; offsets below are into p, so tok[o-8:]
	_ = tok[n-8]  // one bounds check for all the reads
	r := func(o int) uint64 { return binary.LittleEndian.Uint64(tok[o-8:]) }
	acc := uint64(8+n) * xxPrime1
	acc += mulFold(r(32)^(xxKey[8]+seed), r(40)^(xxKey[9]-seed))
	acc += mulFold(r(n-40)^(xxKey[10]+seed), r(n-32)^(xxKey[11]-seed))
	acc += mulFold(r(16)^(xxKey[4]+seed), r(24)^(xxKey[5]-seed))
	acc += mulFold(r(n-24)^(xxKey[6]+seed), r(n-16)^(xxKey[7]-seed))
	acc += mulFold(r(n-8)^(xxKey[2]+seed), r(n)^(xxKey[3]-seed))
	// The parent's term last, so the next block waits only for it and the
	// avalanche (the sum is the same in any order).
	acc += mulFold(parent^(xxKey[0]+seed), r(8)^(xxKey[1]-seed))
	// XXH3's avalanche.
	acc ^= acc >> 37
	acc *= 0x165667919e3779f9
	return acc ^ acc>>32
}

// hashShortMin and hashShortMax bound the token bytes per block that
// hashShort takes.
const (
	hashShortMin = 64 + 1 - 8
	hashShortMax = 96 - 8
)

func mulFold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// xxPrime1 is XXH3's PRIME64_1.
const xxPrime1 = 0x9e3779b185ebca87

// xxKey is the first 96 bytes of XXH3's default secret (kSecret in the
// XXH3 specification) as little-endian 64-bit words.
var xxKey = [12]uint64{
	0xbe4ba423396cfeb8, 0x1cad21f72c81017c, 0xdb979083e96dd4de, 0x1f67b3b7a4a44072,
	0x78e5c0cc4ee679cb, 0x2172ffcc7dd05a82, 0x8e2443f7744608b8, 0x4c263a81e69035e0,
	0xcb00c391bb52283c, 0xa32e531b8b65d088, 0x4ef90da297486471, 0xd8acdea946ef1938,
}
