package gateway

import (
	"strconv"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// Sampling extras (penalties, logit_bias, min_tokens, logprobs) travel in
// GENERATE's sampling section, which only engines announcing
// wire.FeatureSampling are sent: a request that sets one routes among
// those engines alone, and is refused naming the field when there is
// none. A request that sets none sends the version-1 GENERATE to any
// engine.

// needsSampling reports whether req must go to an engine with
// wire.FeatureSampling.
func (req *genRequest) needsSampling() bool { return req.Extras.Field != "" }

// addSampling sets gen's sampling section from req's extras.
func (req *genRequest) addSampling(gen *wire.Generate) {
	if !req.needsSampling() {
		return
	}
	x := &req.Extras
	s := wire.Sampling{PresencePenalty: x.PresencePenalty, FrequencyPenalty: x.FrequencyPenalty,
		RepetitionPenalty: x.RepetitionPenalty,
		// A max_tokens the context cut (fitContext) bounds min_tokens too,
		// which vLLM requires.
		MinTokens: min(x.MinTokens, gen.MaxTokens)}
	if s.RepetitionPenalty == 0 {
		s.RepetitionPenalty = 1
	}
	if x.Logprobs {
		s.Flags, s.TopLogprobs = wire.SampleLogprobs, uint8(x.TopLogprobs)
	}
	if len(x.BiasTokens) > 0 {
		s.LogitBias = wire.LogitBiasOf(x.BiasTokens, x.Bias)
	}
	gen.Flags |= wire.GenSampling
	gen.Sampling = s
}

// checkExtras refuses logit_bias keys outside the vocabulary.
func checkExtras(m *Model, req *api.Request) *api.Error {
	return checkVocab(m.Tok, "logit_bias", req.Extras.BiasTokens)
}

// addLogprobs hands the event's logprobs to the encoder, each token and
// alternative as its text.
func (g *Gateway) addLogprobs(a *attempt, ev engine.Event) {
	enc, ok := a.out.encoder().(api.LogprobsEncoder)
	if !ok || !a.req.Extras.Logprobs || len(ev.Logprobs) == 0 {
		return
	}
	lps := make([]api.TokenLogprob, 0, len(ev.Logprobs))
	for i, en := range ev.Logprobs {
		if i >= len(ev.Tokens) {
			break
		}
		lp := api.TokenLogprob{Token: tokenText(a.req.model.Tok, ev.Tokens[i]), Logprob: en.Logprob, Top: make([]api.TopLogprob, len(en.Top))}
		for j, alt := range en.Top {
			lp.Top[j] = api.TopLogprob{Token: tokenText(a.req.model.Tok, alt.Token), Logprob: alt.Logprob}
		}
		lps = append(lps, lp)
	}
	enc.AddLogprobs(lps)
}

// tokenText is one token's text, special tokens included (vLLM's
// logprobs show them), outside the vocabulary as vLLM names it.
func tokenText(tok *tokenize.Tokenizer, id uint32) string {
	if int(id) >= tok.VocabSize() {
		return "token_id:" + strconv.FormatUint(uint64(id), 10)
	}
	return tok.DecodeString([]uint32{id}, false)
}
