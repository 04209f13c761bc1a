package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Profile is the timing model of a simulated GPU step, in milliseconds.
//
//	prefill(x) = PrefillA*x^2 + PrefillB*x + PrefillC   for x > 0 new tokens in the step
//	decode(p)  = max(DecodeMin, DecodeA*p^2 + DecodeB*p + DecodeC)
//	             for a non-empty decode batch, p = active KV tokens / KV capacity in tokens
//	step       = prefill + decode
//	load       = latency_t + blocks * block bytes / bandwidth_t   for blocks loaded from lower tier t
//
// Loads run beside the steps (loading.go): a request waits for its own, the
// batch does not. Block bytes are KVBytesPerToken times the block size; the
// links are the rank's (RankConfig.CPULink, DiskLink). A profile without
// KVBytesPerToken loads for free.
//
// A step that both prefills and decodes pays both terms, as a mixed batch
// in vLLM does one forward pass over more tokens.
type Profile struct {
	Name      string  `json:"name"`
	PrefillA  float64 `json:"prefill_a"`
	PrefillB  float64 `json:"prefill_b"`
	PrefillC  float64 `json:"prefill_c"`
	DecodeA   float64 `json:"decode_a"`
	DecodeB   float64 `json:"decode_b"`
	DecodeC   float64 `json:"decode_c"`
	DecodeMin float64 `json:"decode_min"`
	// KVBytesPerToken is the model's KV cache size per token, all layers.
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`
	// Groups are the KV cache groups of a hybrid model (hybrid.go), in the
	// order its events number them, each with the rank's block size;
	// empty: one full-attention cache, as every model without groups has.
	Groups []GroupSpec `json:"groups,omitempty"`
}

// GroupSpec is one KV cache group of a simulated hybrid model.
type GroupSpec struct {
	// Kind is "full", "sliding_window" or "mamba" (wire.GroupKind's names).
	Kind string `json:"kind"`
	// Window is a sliding window's span in tokens.
	Window int `json:"window,omitempty"`
}

// DefaultProfile uses the polynomial fits of NVIDIA Dynamo's mocker
// (ai-dynamo/dynamo, mocker perf_model.rs, the Polynomial variant): prefill
// 4.209989e-07*x^2 + 1.518344e-02*x + 16.50142 ms over the batch's new tokens,
// and decode -25.74*p^2 + 54.01*p + 5.74 ms over KV utilisation p, at least
// 1 ms. Dynamo's source does not say which GPU and model they were fitted
// on; they are a plausible large-model shape (16.5 ms fixed prefill cost,
// ~15 us per prompt token, 6-34 ms per decode step as the cache fills).
// KVBytesPerToken is Qwen3-8B's: 36 layers x 8 KV heads x 128 dims x K and
// V x 2 bytes (bf16) = 147,456 bytes, 2.36 MB per 16-token block.
var DefaultProfile = Profile{
	Name:     "default",
	PrefillA: 4.209989e-07, PrefillB: 1.518344e-02, PrefillC: 16.50142,
	DecodeA: -25.74, DecodeB: 54.01, DecodeC: 5.74, DecodeMin: 1,
	KVBytesPerToken: 147456,
}

// ZeroProfile makes every step free: the engine answers as fast as the
// process runs, for benchmarks of the router itself.
var ZeroProfile = Profile{Name: "zero"}

// GPTOSSLikeProfile is a gpt-oss-like hybrid model: layers alternate
// sliding-window attention over 128 tokens and full attention, the first
// layer a sliding one (gpt-oss's layer_types), so vLLM makes two KV cache
// groups, the window's first. Timing as DefaultProfile.
var GPTOSSLikeProfile = hybridProfile("gptoss-like",
	GroupSpec{Kind: "sliding_window", Window: 128}, GroupSpec{Kind: "full"})

// Qwen3NextLikeProfile is a Qwen3-Next-like hybrid model: three linear
// attention (Gated DeltaNet, Mamba-style state) layers to one full
// attention layer, which vLLM groups as three Mamba groups then one full
// group. Timing as DefaultProfile.
var Qwen3NextLikeProfile = hybridProfile("qwen3next-like",
	GroupSpec{Kind: "mamba"}, GroupSpec{Kind: "mamba"}, GroupSpec{Kind: "mamba"}, GroupSpec{Kind: "full"})

func hybridProfile(name string, groups ...GroupSpec) Profile {
	p := DefaultProfile
	p.Name, p.Groups = name, groups
	return p
}

// Profiles are the built-in profiles by name.
var Profiles = map[string]Profile{"default": DefaultProfile, "zero": ZeroProfile,
	GPTOSSLikeProfile.Name: GPTOSSLikeProfile, Qwen3NextLikeProfile.Name: Qwen3NextLikeProfile}

// LoadProfile returns a built-in profile by name, or reads a JSON file.
func LoadProfile(nameOrPath string) (Profile, error) {
	if p, ok := Profiles[nameOrPath]; ok {
		return p, nil
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return Profile{}, fmt.Errorf("sim: profile %q is neither built in nor a readable file: %w", nameOrPath, err)
	}
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		return Profile{}, fmt.Errorf("sim: parsing profile %s: %w", nameOrPath, err)
	}
	if p.Name == "" {
		p.Name = nameOrPath
	}
	return p, nil
}

// free reports whether every step and every load takes no time (ZeroProfile).
func (p *Profile) free() bool {
	return p.PrefillA == 0 && p.PrefillB == 0 && p.PrefillC == 0 && p.DecodeA == 0 && p.DecodeB == 0 &&
		p.DecodeC == 0 && p.DecodeMin == 0 && p.KVBytesPerToken == 0
}

// StepTime returns the duration of one step that prefills prefillTokens new
// tokens, decodes a batch holding activeKV of capacityKV tokens (decoding
// says whether there is a decode batch at all).
func (p *Profile) StepTime(prefillTokens int, decoding bool, activeKV, capacityKV int) time.Duration {
	ms := 0.0
	if prefillTokens > 0 {
		x := float64(prefillTokens)
		ms += p.PrefillA*x*x + p.PrefillB*x + p.PrefillC
	}
	if decoding {
		u := 1.0
		if capacityKV > 0 {
			u = float64(activeKV) / float64(capacityKV)
		}
		ms += max(p.DecodeMin, p.DecodeA*u*u+p.DecodeB*u+p.DecodeC)
	}
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}
