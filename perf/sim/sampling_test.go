package sim

import (
	"math"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
)

// runSampled runs one request on a fresh core to its end and returns its
// outputs that carry a token.
func runSampled(t *testing.T, p Params, prompt []uint32) []Output {
	t.Helper()
	c := newCore(t, testRank(1024, 0))
	key := RequestKey{Stream: 1}
	must(t, c.Add(NewRequest(key, prompt, p, kvstore.Keys{})))
	var outs []Output
	for range 100000 {
		for _, o := range c.Step().Outputs {
			if o.Key != key {
				continue
			}
			if o.HasToken {
				outs = append(outs, o)
			}
			if o.Finish != 0 {
				return outs
			}
		}
	}
	t.Fatal("request never finished")
	return nil
}

func tokensOf(outs []Output) []uint32 {
	var ids []uint32
	for _, o := range outs {
		ids = append(ids, o.Token)
	}
	return ids
}

var samplePrompt = []uint32{10, 20, 30, 40}

// Without extras, or with extras that change nothing, the output is the
// sampler's as it always was; logprobs come from the same choice.
func TestSamplingNeutral(t *testing.T) {
	base := Params{MaxTokens: 12, IgnoreEOS: true, Seed: 7, HasSeed: true}
	plain := tokensOf(runSampled(t, base, samplePrompt))
	withLP := base
	withLP.Sampling = &Sampling{RepetitionPenalty: 1, Logprobs: true, TopLogprobs: 3}
	outs := runSampled(t, withLP, samplePrompt)
	if !slices.Equal(tokensOf(outs), plain) {
		t.Fatalf("logprobs changed the output:\n%v\n%v", tokensOf(outs), plain)
	}
	for i, o := range outs {
		lp := o.Logprob
		if !o.HasLogprob || len(lp.Top) != 3 || lp.Top[0].Token != o.Token || lp.Top[0].Logprob != lp.Logprob {
			t.Fatalf("token %d: %+v", i, o)
		}
		if !(lp.Logprob < 0) || !(lp.Top[1].Logprob < lp.Top[0].Logprob) || !(lp.Top[2].Logprob < lp.Top[1].Logprob) {
			t.Fatalf("token %d: logprobs not negative and falling: %+v", i, lp)
		}
	}
	// The candidates' mass is the whole: the first one's probability is
	// 1 / sum(exp(-step*j)).
	var sum float64
	for j := range numCandidates {
		sum += math.Exp(-logitStep * float64(j))
	}
	if got, want := float64(outs[0].Logprob.Logprob), -math.Log(sum); math.Abs(got-want) > 1e-5 {
		t.Fatalf("first logprob %v, want %v", got, want)
	}
}

func TestSamplingChangesChoice(t *testing.T) {
	base := Params{MaxTokens: 8, IgnoreEOS: true, Seed: 3, HasSeed: true}
	plain := tokensOf(runSampled(t, base, samplePrompt))

	t.Run("logit_bias up", func(t *testing.T) {
		p := base
		p.Sampling = &Sampling{Bias: map[uint32]float32{42: 100}}
		for _, tok := range tokensOf(runSampled(t, p, samplePrompt)) {
			if tok != 42 {
				t.Fatalf("token %d despite a +100 bias on 42", tok)
			}
		}
	})
	t.Run("logit_bias down", func(t *testing.T) {
		p := base
		p.Sampling = &Sampling{Bias: map[uint32]float32{plain[0]: -100}}
		if got := tokensOf(runSampled(t, p, samplePrompt)); got[0] == plain[0] {
			t.Fatalf("first token %d despite a -100 bias", got[0])
		}
	})
	t.Run("presence penalty", func(t *testing.T) {
		p := base
		// A bias makes 42 (from outside the candidates, at the lowest
		// logit) the choice by 1; a presence penalty of 2 lets it out once.
		bias := float32(firstLogit-(firstLogit-logitStep*(numCandidates-1))) + 1
		p.Sampling = &Sampling{Bias: map[uint32]float32{42: bias}, PresencePenalty: 2}
		got := tokensOf(runSampled(t, p, samplePrompt))
		if got[0] != 42 || slices.Contains(got[1:], 42) {
			t.Fatalf("tokens %v: 42 first, then never again", got)
		}
	})
	t.Run("repetition penalty", func(t *testing.T) {
		p := base
		prompt := append(slices.Clone(samplePrompt), plain[0])
		first := tokensOf(runSampled(t, base, prompt))[0]
		p.Sampling = &Sampling{RepetitionPenalty: 2}
		if got := tokensOf(runSampled(t, p, prompt)); got[0] == first && slices.Contains(prompt, first) {
			t.Fatalf("token %d of the prompt chosen despite the repetition penalty", got[0])
		}
	})
}

// min_tokens holds EOS off: a request that would end at its first token
// goes on until min_tokens.
func TestSamplingMinTokens(t *testing.T) {
	// Bias EOS up so that it ends every request at once, then hold it off.
	p := Params{MaxTokens: 20, Seed: 1, HasSeed: true, Sampling: &Sampling{Bias: map[uint32]float32{DefaultEOS: 100}}}
	if n := len(runSampled(t, p, samplePrompt)); n != 1 {
		t.Fatalf("%d tokens with EOS biased up, want 1", n)
	}
	p.Sampling.MinTokens = 5
	outs := runSampled(t, p, samplePrompt)
	if len(outs) != 6 || outs[5].Token != DefaultEOS || slices.Contains(tokensOf(outs[:5]), DefaultEOS) {
		t.Fatalf("tokens %v: want 5 before EOS", tokensOf(outs))
	}
}
