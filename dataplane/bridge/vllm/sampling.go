package vllm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/wire"
)

// GENERATE's sampling section (wire.FeatureSampling) maps onto vLLM's
// /v1/completions fields of the same meaning, by vLLM's names
// (vllm-project/vllm vllm/entrypoints/openai/protocol.py CompletionRequest
// at ec3b890c14b00f6670515d9df8d503b5270e95ca: presence_penalty,
// frequency_penalty, repetition_penalty, logit_bias, min_tokens, logprobs,
// return_tokens_as_token_ids). vLLM streams each chunk's logprobs as
// CompletionLogProbs (tokens, token_logprobs, top_logprobs as
// {token: logprob} objects); with return_tokens_as_token_ids every token
// is "token_id:<id>", which is how they become ids again.

// ErrMalformedLogprobs: the engine's logprobs do not cover its tokens as
// asked (a vLLM that ignores return_tokens_as_token_ids, or none at all).
var ErrMalformedLogprobs = errors.New("vllm: the engine's logprobs do not match its tokens")

// Features are the wire features the vLLM mode adds to the bridge's
// handshake: the sampling section, and images for a vision model
// (Multimodal). The SGLang mode adds none.
func (e *Engine) Features() wire.Feature {
	if e.SGLang != nil {
		return 0
	}
	if e.Multimodal {
		return wire.FeatureSampling | wire.FeatureMultimodal
	}
	return wire.FeatureSampling
}

// samplingFields are the completion request's fields from the sampling
// section; all are left out of a GENERATE without one.
type samplingFields struct {
	PresencePenalty        *float32           `json:"presence_penalty,omitempty"`
	FrequencyPenalty       *float32           `json:"frequency_penalty,omitempty"`
	RepetitionPenalty      *float32           `json:"repetition_penalty,omitempty"`
	LogitBias              map[string]float32 `json:"logit_bias,omitempty"`
	MinTokens              uint32             `json:"min_tokens,omitempty"`
	Logprobs               *int               `json:"logprobs,omitempty"`
	ReturnTokensAsTokenIDs bool               `json:"return_tokens_as_token_ids,omitempty"`
}

func samplingOf(g *wire.Generate) samplingFields {
	var f samplingFields
	if g.Flags&wire.GenSampling == 0 {
		return f
	}
	s := &g.Sampling
	nonzero := func(v, off float32) *float32 {
		if v == off {
			return nil
		}
		return &v
	}
	f.PresencePenalty, f.FrequencyPenalty = nonzero(s.PresencePenalty, 0), nonzero(s.FrequencyPenalty, 0)
	f.RepetitionPenalty = nonzero(s.RepetitionPenalty, 1)
	f.MinTokens = s.MinTokens
	if n := s.LogitBias.Len(); n > 0 {
		f.LogitBias = make(map[string]float32, n)
		for i := range n {
			t, b := s.LogitBias.At(i)
			f.LogitBias[strconv.FormatUint(uint64(t), 10)] = b
		}
	}
	if s.Logprobs() {
		n := int(s.TopLogprobs)
		f.Logprobs, f.ReturnTokensAsTokenIDs = &n, true
	}
	return f
}

// topN is the alternatives per token asked for, -1 for no logprobs.
func (f *samplingFields) topN() int {
	if f.Logprobs == nil {
		return -1
	}
	return *f.Logprobs
}

// completionLogprobs is vLLM's CompletionLogProbs (the fields the bridge
// reads); a null logprob is vLLM's for a token it has none for.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
}

// floorLogprob stands for a missing or zero probability (vLLM's -9999).
const floorLogprob = -9999

// entries are n tokens' logprobs with topN alternatives each, most likely
// first (ties by token id).
func (l *completionLogprobs) entries(n, topN int) ([]wire.LogprobEntry, error) {
	if l == nil || len(l.TokenLogprobs) != n || len(l.TopLogprobs) != n {
		return nil, fmt.Errorf("%w: a chunk of %d tokens without their logprobs", ErrMalformedLogprobs, n)
	}
	out := make([]wire.LogprobEntry, n)
	for i := range out {
		out[i].Logprob = floorLogprob
		if p := l.TokenLogprobs[i]; p != nil {
			out[i].Logprob = *p
		}
		alts := make([]wire.Alt, 0, len(l.TopLogprobs[i]))
		for tok, lp := range l.TopLogprobs[i] {
			id, err := tokenID(tok)
			if err != nil {
				return nil, err
			}
			alts = append(alts, wire.Alt{Token: id, Logprob: lp})
		}
		if len(alts) < topN {
			return nil, fmt.Errorf("%w: %d alternatives, %d asked for", ErrMalformedLogprobs, len(alts), topN)
		}
		slices.SortFunc(alts, func(a, b wire.Alt) int {
			return cmp.Or(cmp.Compare(b.Logprob, a.Logprob), cmp.Compare(a.Token, b.Token))
		})
		out[i].Top = alts[:topN]
	}
	return out, nil
}

// tokenID reads return_tokens_as_token_ids' "token_id:<id>".
func tokenID(tok string) (uint32, error) {
	s, ok := strings.CutPrefix(tok, "token_id:")
	id, err := strconv.ParseUint(s, 10, 32)
	if !ok || err != nil {
		return 0, fmt.Errorf("%w: token %q is not token_id:<id> (return_tokens_as_token_ids)", ErrMalformedLogprobs, tok)
	}
	return uint32(id), nil
}
