package api

import "math"

// TokenLogprob is one output token's logprob with its most likely
// alternatives, as the gateway hands them to an encoder: Token is the
// token's text.
type TokenLogprob struct {
	Token   string
	Logprob float32
	Top     []TopLogprob
}

// TopLogprob is one alternative of an output token.
type TopLogprob struct {
	Token   string
	Logprob float32
}

// LogprobsEncoder is an Encoder that returns logprobs (OpenAI's two
// shapes). AddLogprobs gives it the logprobs of the tokens whose text the
// next Delta (or Close) carries; they go out with it.
type LogprobsEncoder interface {
	Encoder
	AddLogprobs(lps []TokenLogprob)
}

// floorLogprob stands for a probability of zero, which JSON cannot carry
// as -Inf (vLLM sends the same).
const floorLogprob = -9999.0

func jsonLogprob(lp float32) float64 {
	if math.IsInf(float64(lp), -1) || math.IsNaN(float64(lp)) || lp < floorLogprob {
		return floorLogprob
	}
	return float64(lp)
}

func utf8Bytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// chatLogprobs is Chat Completions' choice.logprobs: {"content": [...]}.
func chatLogprobs(lps []TokenLogprob) map[string]any {
	content := make([]any, len(lps))
	for i, lp := range lps {
		top := make([]any, len(lp.Top))
		for j, t := range lp.Top {
			top[j] = map[string]any{"token": t.Token, "logprob": jsonLogprob(t.Logprob), "bytes": utf8Bytes(t.Token)}
		}
		content[i] = map[string]any{"token": lp.Token, "logprob": jsonLogprob(lp.Logprob),
			"bytes": utf8Bytes(lp.Token), "top_logprobs": top}
	}
	return map[string]any{"content": content, "refusal": nil}
}

// completionLogprobs is Completions' choice.logprobs; offset is the text
// offset of the first token in the choice's text, advanced past them.
func completionLogprobs(lps []TokenLogprob, offset *int) map[string]any {
	tokens := make([]string, len(lps))
	lpv := make([]float64, len(lps))
	tops := make([]map[string]float64, len(lps))
	offsets := make([]int, len(lps))
	for i, lp := range lps {
		tokens[i], lpv[i], offsets[i] = lp.Token, jsonLogprob(lp.Logprob), *offset
		*offset += len(lp.Token)
		tops[i] = make(map[string]float64, len(lp.Top)+1)
		for _, t := range lp.Top {
			tops[i][t.Token] = jsonLogprob(t.Logprob)
		}
		tops[i][lp.Token] = jsonLogprob(lp.Logprob) // as vLLM: the sampled token is among them
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lpv, "top_logprobs": tops, "text_offset": offsets}
}

// AddLogprobs implements LogprobsEncoder.
func (o *OpenAIEncoder) AddLogprobs(lps []TokenLogprob) { o.pending = append(o.pending, lps...) }

// takeLogprobs is the logprobs object of the next choice: the pending
// logprobs in the endpoint's shape, or nil (JSON null) when the request
// asked for none.
func (o *OpenAIEncoder) takeLogprobs() any {
	if !o.Logprobs {
		return nil
	}
	lps := o.pending
	o.pending = o.pending[:0:0]
	if o.Chat {
		return chatLogprobs(lps)
	}
	return completionLogprobs(lps, &o.textOffset)
}
