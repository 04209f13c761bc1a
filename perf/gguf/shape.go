package gguf

import "fmt"

// Shape is a Llama-architecture model's hyperparameters: what llama.cpp
// reads from the llama.* keys. The vocabulary size comes from the tokenizer.
type Shape struct {
	// Embedding is the hidden size (llama.embedding_length).
	Embedding int
	// Blocks is the number of transformer blocks (llama.block_count).
	Blocks int
	// FeedForward is the SwiGLU inner size (llama.feed_forward_length).
	FeedForward int
	// Heads and KVHeads are the query and key/value head counts
	// (llama.attention.head_count, head_count_kv); Embedding/Heads is the
	// head size, which is also the rotary dimension.
	Heads, KVHeads int
	// ContextLength is the context the model says it was trained for
	// (llama.context_length); llama-server's --ctx-size picks the context
	// it runs with, up to this.
	ContextLength int
	// RMSEpsilon is the RMS norm epsilon
	// (llama.attention.layer_norm_rms_epsilon).
	RMSEpsilon float32
	// RopeFreqBase is the rotary base (llama.rope.freq_base).
	RopeFreqBase float32
	// TiedOutput leaves the output tensor out, so llama.cpp projects
	// logits with token_embd, as models with tied embeddings do; it needs
	// Options.GenerateAll.
	TiedOutput bool
}

// Small is the default shape: about 40 M parameters with the Qwen3
// vocabulary (151,669 tokens), nearly all of them in the embedding and
// output matrices, so it loads in a second and prefills thousands of tokens
// a second on a CPU while llama.cpp still runs every layer of a real model.
func Small() Shape {
	return Shape{
		Embedding:     128,
		Blocks:        8,
		FeedForward:   512,
		Heads:         4,
		KVHeads:       2,
		ContextLength: 32768,
		RMSEpsilon:    1e-6,
		RopeFreqBase:  1e6,
	}
}

// Qwen25HalfB is the shape of Qwen2.5-0.5B (hidden 896, 24 blocks, 14 query
// and 2 key/value heads, SwiGLU 4,864, rotary base 1e6) for benchmarks where
// prefill and decode should cost what a small real model costs: 494 M
// parameters with the Qwen3 vocabulary, and 136 M more in an output matrix
// of its own, which Qwen2.5-0.5B shares with its embeddings but which
// steers generation here (see Options.GenerateAll); it only ever multiplies
// the last position, so prefill costs the same. It is the Llama
// architecture, so it lacks Qwen2's q/k/v biases.
func Qwen25HalfB() Shape {
	return Shape{
		Embedding:     896,
		Blocks:        24,
		FeedForward:   4864,
		Heads:         14,
		KVHeads:       2,
		ContextLength: 32768,
		RMSEpsilon:    1e-6,
		RopeFreqBase:  1e6,
	}
}

// HeadDim is the size of one attention head.
func (s Shape) HeadDim() int { return s.Embedding / s.Heads }

// Validate reports the first inconsistency of s: llama.cpp would refuse the
// file or compute nonsense with it.
func (s Shape) Validate() error {
	switch {
	case s.Embedding <= 0 || s.Blocks <= 0 || s.FeedForward <= 0 || s.Heads <= 0 || s.KVHeads <= 0:
		return fmt.Errorf("%w: sizes must be positive: %+v", ErrInvalidShape, s)
	case s.Embedding%s.Heads != 0:
		return fmt.Errorf("%w: embedding %d is not a multiple of %d heads", ErrInvalidShape, s.Embedding, s.Heads)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("%w: %d heads are not a multiple of %d key/value heads", ErrInvalidShape, s.Heads, s.KVHeads)
	case s.HeadDim()%2 != 0:
		return fmt.Errorf("%w: head size %d is odd (rotary embeddings rotate pairs)", ErrInvalidShape, s.HeadDim())
	case s.ContextLength <= 0:
		return fmt.Errorf("%w: context length %d", ErrInvalidShape, s.ContextLength)
	case s.RMSEpsilon <= 0 || s.RopeFreqBase <= 0:
		return fmt.Errorf("%w: RMS epsilon %g and rotary base %g must be positive", ErrInvalidShape, s.RMSEpsilon, s.RopeFreqBase)
	}
	return nil
}

// Params is the number of parameters of s with a vocabulary of vocab tokens.
func (s Shape) Params(vocab int) int64 {
	var n int64
	for _, t := range s.tensors(vocab) {
		n += t.elements()
	}
	return n
}

// tensorKind says how a tensor's values are made (see writeWeights).
type tensorKind int

const (
	kindMatrix   tensorKind = iota // random
	kindNorm                       // ones, F32
	kindEmbed                      // random; the anchor in dimension 0
	kindOutput                     // random for tokens to generate, steering away from the others
	kindBlockOut                   // random, but nothing written into dimension 0
)

// tensorSpec is one tensor of the model: its name, dimensions (ne[0]
// first) and kind.
type tensorSpec struct {
	name string
	ne   []int64
	kind tensorKind
}

func (t tensorSpec) elements() int64 {
	n := int64(1)
	for _, d := range t.ne {
		n *= d
	}
	return n
}

// tensors lists s's tensors in file order, named and shaped as
// llama_model_llama::load_arch_tensors creates them.
func (s Shape) tensors(vocab int) []tensorSpec {
	e, v, ff := int64(s.Embedding), int64(vocab), int64(s.FeedForward)
	kv := int64(s.KVHeads * s.HeadDim())
	out := []tensorSpec{
		{name: "token_embd.weight", ne: []int64{e, v}, kind: kindEmbed},
		{name: "output_norm.weight", ne: []int64{e}, kind: kindNorm},
	}
	if !s.TiedOutput {
		out = append(out, tensorSpec{name: "output.weight", ne: []int64{e, v}, kind: kindOutput})
	}
	for i := range s.Blocks {
		b := fmt.Sprintf("blk.%d.", i)
		out = append(out,
			tensorSpec{name: b + "attn_norm.weight", ne: []int64{e}, kind: kindNorm},
			tensorSpec{name: b + "attn_q.weight", ne: []int64{e, e}},
			tensorSpec{name: b + "attn_k.weight", ne: []int64{e, kv}},
			tensorSpec{name: b + "attn_v.weight", ne: []int64{e, kv}},
			tensorSpec{name: b + "attn_output.weight", ne: []int64{e, e}, kind: kindBlockOut},
			tensorSpec{name: b + "ffn_norm.weight", ne: []int64{e}, kind: kindNorm},
			tensorSpec{name: b + "ffn_gate.weight", ne: []int64{e, ff}},
			tensorSpec{name: b + "ffn_up.weight", ne: []int64{e, ff}},
			tensorSpec{name: b + "ffn_down.weight", ne: []int64{ff, e}, kind: kindBlockOut},
		)
	}
	return out
}
