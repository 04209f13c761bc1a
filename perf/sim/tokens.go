package sim

// Token generation is deterministic: the k-th token of a request depends
// only on its seed and k, so a replayed trace produces the same text.

// vocabSize is the range of ordinary token ids the simulator emits (Qwen's
// byte-level BPE vocabulary without its special tokens).
const vocabSize = 151643

// DefaultEOS is the end-of-sequence id (Qwen's <|im_end|>).
const DefaultEOS = 151645

// eosOneIn makes a request without ignore_eos stop with probability 1/eosOneIn
// per token, about 256 tokens on average.
const eosOneIn = 256

func seedOf(requestID string, prompt []uint32) uint64 {
	// Stable across runs: a fixed mix of the prompt ids and request id.
	h := uint64(0x9E3779B97F4A7C15)
	for _, t := range prompt {
		h = splitmix(h ^ uint64(t))
	}
	for i := 0; i < len(requestID); i++ {
		h = splitmix(h ^ uint64(requestID[i]))
	}
	return h
}

func splitmix(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// nextToken returns the k-th generated token and whether it is EOS.
func nextToken(seed uint64, k int, ignoreEOS bool, eos uint32) (uint32, bool) {
	r := splitmix(seed + uint64(k)*0xD1B54A32D192ED03)
	if !ignoreEOS && r%eosOneIn == 0 {
		return eos, true
	}
	return uint32((r >> 8) % vocabSize), false
}
