package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
)

// weightScale bounds the uniform random weights: a standard deviation of
// 0.02 (scale/sqrt(3)), the usual initialisation of transformer weights,
// keeps activations finite through every block without any training.
const weightScale = 0.02 * 1.7320508

// chunk is how many weights are generated and written at a time.
const chunk = 1 << 15

// f16Uniform maps 16 random bits to an F16 weight spread evenly over
// [-weightScale, weightScale): one table lookup a weight, four weights from
// each 64 random bits, so a 40 M-parameter model is written in well under
// a second.
var f16Uniform = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for k := range t {
		t[k] = float16(float32(k-1<<15) * (weightScale / (1 << 15)))
	}
	return &t
})

// writeWeights writes tensor t's data: ones for a norm weight, otherwise
// uniform random values from a PCG generator seeded with (seed, index), so
// each tensor's values depend on the seed and its place only.
func writeWeights(e *encoder, t tensorSpec, typ TensorType, seed, index uint64) {
	rng := rand.NewPCG(seed, index)
	tbl := f16Uniform()
	size := int(typ.size())
	buf := make([]byte, chunk*size)
	for left := t.elements(); left > 0 && e.err == nil; {
		n := int(min(left, chunk))
		b := buf[:n*size]
		switch {
		case t.norm:
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(1))
			}
		case typ == F16:
			for i := 0; i < n; i += 4 {
				r := rng.Uint64()
				for j := i; j < min(i+4, n); j++ {
					binary.LittleEndian.PutUint16(b[2*j:], tbl[uint16(r)])
					r >>= 16
				}
			}
		default:
			for i := 0; i < n; i += 2 {
				r := rng.Uint64()
				for j := i; j < min(i+2, n); j++ {
					x := float32(int32(uint32(r))) * (weightScale / (1 << 31))
					binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
					r >>= 32
				}
			}
		}
		e.write(b)
		left -= int64(n)
	}
}

// float16 converts f to IEEE 754 half precision, rounding to nearest even;
// values beyond the half range become infinities (NaN is never passed).
func float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff == 0:
		return sign
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0: // a half subnormal, or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h, rem, mid := mant>>shift, mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > mid || (rem == mid && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry out of the mantissa raises the exponent, as it should
	}
	return sign | uint16(h)
}
