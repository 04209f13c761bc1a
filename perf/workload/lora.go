package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// multiLoRA builds the multi-LoRA workload: adapters LoRA adapters (ids 1
// to adapters), adapter k drawn with probability proportional to
// 1/k^zipf, each with its own shared prefix (its system prompt) of prefix
// tokens, then suffix tokens of the request's own; n requests arriving as
// a Poisson process at rate per second (adapters, zipf, prefix, suffix, n,
// rate, output, seed).
func multiLoRA(p params, rng *rand.Rand, randTokens func(int) []uint32, tl *timeline) []Request {
	adapters := int(p.get("adapters", 64))
	cdf := zipfCDF(adapters, p.get("zipf", 1))
	prefixes := make([][]uint32, adapters)
	for i := range prefixes {
		prefixes[i] = randTokens(int(p.get("prefix", 2048)))
	}
	rate := p.get("rate", 20)
	var out []Request
	var at time.Duration
	for i := range int(p.get("n", 2000)) {
		at = tl.after(at, rng.ExpFloat64()/rate)
		a := pick(cdf, rng.Float64())
		prompt := append(append([]uint32(nil), prefixes[a]...), randTokens(int(p.get("suffix", 256)))...)
		out = append(out, Request{At: at, Prompt: prompt, Output: int(p.get("output", 64)), LoRA: uint32(a + 1),
			Session: fmt.Sprintf("lora%d-%d", a+1, i)})
	}
	return out
}

// zipfCDF is the cumulative distribution of ranks 0..n-1 drawn with
// probability proportional to 1/(rank+1)^s (s 0: uniform).
func zipfCDF(n int, s float64) []float64 {
	cdf := make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return cdf
}

// pick is the first rank whose cumulative probability reaches u.
func pick(cdf []float64, u float64) int {
	lo, hi := 0, len(cdf)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if cdf[mid] >= u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
