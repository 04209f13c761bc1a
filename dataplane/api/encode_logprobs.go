package api

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

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
// asked for none (a whole response's).
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

// appendLogprobs appends the next stream chunk's logprobs (the pending
// ones, then forgotten, their slice kept for the next) or null: the bytes
// json.Marshal of takeLogprobs' maps would be (keys sorted), written in
// place.
func (o *OpenAIEncoder) appendLogprobs(dst []byte) []byte {
	if !o.Logprobs {
		return append(dst, "null"...)
	}
	if o.Chat {
		dst = appendChatLogprobs(dst, o.pending)
	} else {
		dst, o.order = appendCompletionLogprobs(dst, o.pending, &o.textOffset, o.order)
	}
	clear(o.pending) // the tokens' strings are not kept alive
	o.pending = o.pending[:0]
	return dst
}

func appendTokenBytes(dst []byte, s string) []byte {
	dst = append(dst, '[')
	for i := range len(s) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(s[i]), 10)
	}
	return append(dst, ']')
}

// appendChatLogprob appends {"bytes","logprob","token"} and leaves the
// object open.
func appendChatLogprob(dst []byte, token string, lp float32) []byte {
	dst = append(dst, `{"bytes":`...)
	dst = appendTokenBytes(dst, token)
	dst = append(dst, `,"logprob":`...)
	dst = appendJSONFloat(dst, jsonLogprob(lp))
	dst = append(dst, `,"token":`...)
	return appendJSONString(dst, token)
}

// appendChatLogprobs appends chatLogprobs(lps) as JSON.
func appendChatLogprobs(dst []byte, lps []TokenLogprob) []byte {
	dst = append(dst, `{"content":[`...)
	for i := range lps {
		lp := &lps[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendChatLogprob(dst, lp.Token, lp.Logprob)
		dst = append(dst, `,"top_logprobs":[`...)
		for j, t := range lp.Top {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendChatLogprob(dst, t.Token, t.Logprob), '}')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, `],"refusal":null}`...)
}

// appendCompletionLogprobs appends completionLogprobs(lps, offset) as
// JSON; order is scratch space, returned for reuse.
func appendCompletionLogprobs(dst []byte, lps []TokenLogprob, offset *int, order []TopLogprob) ([]byte, []TopLogprob) {
	dst = append(dst, `{"text_offset":[`...)
	for i := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(*offset), 10)
		*offset += len(lps[i].Token)
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONFloat(dst, jsonLogprob(lps[i].Logprob))
	}
	dst = append(dst, `],"tokens":[`...)
	for i := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, lps[i].Token)
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := range lps {
		if i > 0 {
			dst = append(dst, ',')
		}
		order = topObject(order[:0], &lps[i])
		dst = append(dst, '{')
		for j, t := range order {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendJSONString(dst, t.Token), ':')
			dst = appendJSONFloat(dst, jsonLogprob(t.Logprob))
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...), order
}

// topObject is a Completions top_logprobs object as completionLogprobs'
// map holds it: each text once with its last value, the sampled token's
// own set last of all, sorted by text as encoding/json writes a map.
func topObject(dst []TopLogprob, lp *TokenLogprob) []TopLogprob {
	set := func(tok string, v float32) {
		for k := range dst {
			if dst[k].Token == tok {
				dst[k].Logprob = v
				return
			}
		}
		dst = append(dst, TopLogprob{Token: tok, Logprob: v})
	}
	for _, t := range lp.Top {
		set(t.Token, t.Logprob)
	}
	set(lp.Token, lp.Logprob)
	slices.SortFunc(dst, func(a, b TopLogprob) int { return strings.Compare(a.Token, b.Token) })
	return dst
}
