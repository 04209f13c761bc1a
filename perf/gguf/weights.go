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

// blockOutShrink divides the matrices that write a block's result into the
// residual stream (attn_output, ffn_down). The blocks still run in full,
// with the same cost and KV cache, but move the hidden state so little that
// greedy decoding depends on the input with margins far above the rounding
// differences between llama.cpp's batched prefill and its single-token
// steps: at full scale, 8 of 40 greedy completions of a cached prompt (the
// last prompt token evaluated alone) began with another token than the
// same prompt's first, uncached completion; at 1/50, none did.
const blockOutShrink = 50

// Steering (see Options.GenerateAll). Every token's embedding holds
// anchor in dimension 0, and no block writes that dimension (row 0 of
// attn_output and ffn_down is zero), so after the final RMS norm dimension
// 0 of every position's hidden state is by far its largest (about 11 for
// the Small shape, 26 for Qwen25HalfB, the others about 0.2). A token not
// to be generated has avoid in dimension 0 of its output row and zeros
// elsewhere: its logit is below -40, against logits of a few hundredths
// for the others, so neither greedy nor sampled decoding picks it. A token
// to be generated has 0 there.
const (
	anchor = 1.0
	avoid  = -4.0
)

// chunk is about how many weights are generated and written at a time: a
// whole number of rows, at least one.
const chunk = 1 << 15

// f16Uniform maps 16 random bits to an F16 weight spread evenly over
// [-weightScale, weightScale) (table 0) or that divided by blockOutShrink
// (table 1): one table lookup a weight, four weights from each 64 random
// bits, so a 40 M-parameter model is written in well under a second.
var f16Uniform = sync.OnceValue(func() *[2][1 << 16]uint16 {
	var t [2][1 << 16]uint16
	for k := range t[0] {
		x := float32(k-1<<15) * (weightScale / (1 << 15))
		t[0][k], t[1][k] = float16(x), float16(x/blockOutShrink)
	}
	return &t
})

// scale is the bound of t's random values.
func (t tensorSpec) scale() (bound float32, table int) {
	if t.kind == kindBlockOut {
		return weightScale / blockOutShrink, 1
	}
	return weightScale, 0
}

// weights says how writeWeights fills tensors: steer, and the tokens
// generation may pick (indexed by id) when it does.
type weights struct {
	seed     uint64
	steer    bool
	generate []bool
}

// write writes tensor t, the index-th of the file, as type typ: ones for a
// norm weight, otherwise uniform random values from a PCG generator seeded
// with (seed, index), so each tensor's values depend on the seed and its
// place only, then the steering values over them. It works a whole number
// of rows (ne[0] elements each) at a time.
func (w *weights) write(e *encoder, t tensorSpec, typ TensorType, index uint64) {
	rng := rand.NewPCG(w.seed, index)
	bound, table := t.scale()
	tbl := &f16Uniform()[table]
	size, row := int(typ.size()), int(t.ne[0])
	rowsPer := max(1, chunk/row)
	buf := make([]byte, rowsPer*row*size)
	rows := int(t.elements() / int64(row))
	for first := 0; first < rows && e.err == nil; first += rowsPer {
		n := min(rowsPer, rows-first) * row
		b := buf[:n*size]
		switch {
		case t.kind == kindNorm:
			for i := range n {
				put(b, typ, i, 1)
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
					put(b, typ, j, float32(int32(uint32(r)))*(bound/(1<<31)))
					r >>= 32
				}
			}
		}
		if w.steer {
			for i := 0; i < n; i += row {
				w.steerRow(b[i*size:(i+row)*size], t.kind, typ, first+i/row)
			}
		}
		e.write(b)
	}
}

// steerRow overwrites what steering sets in row r of a tensor of kind k.
func (w *weights) steerRow(b []byte, k tensorKind, typ TensorType, r int) {
	switch k {
	case kindEmbed:
		put(b, typ, 0, anchor)
	case kindOutput:
		if r < len(w.generate) && w.generate[r] {
			put(b, typ, 0, 0)
			return
		}
		clear(b)
		put(b, typ, 0, avoid)
	case kindBlockOut:
		if r == 0 {
			clear(b)
		}
	}
}

// put writes x as element i of b.
func put(b []byte, typ TensorType, i int, x float32) {
	if typ == F16 {
		binary.LittleEndian.PutUint16(b[2*i:], float16(x))
		return
	}
	binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
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
