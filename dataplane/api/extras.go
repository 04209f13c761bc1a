package api

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Extras are a request's sampling and output options beyond those every
// engine honours: an engine must announce them (wire.FeatureSampling) to
// be sent them, and a request that sets one and finds no such engine is
// refused naming it (Field).
type Extras struct {
	PresencePenalty   float32
	FrequencyPenalty  float32
	RepetitionPenalty float32 // 0: not given (1, off)
	MinTokens         uint32
	// Logprobs asks for each generated token's logprob, TopLogprobs for
	// that many alternatives of each (chat top_logprobs, completions
	// logprobs n).
	Logprobs    bool
	TopLogprobs int
	// BiasTokens and Bias are logit_bias, in ascending token order.
	BiasTokens []uint32
	Bias       []float32
	// Field names the first field the client set that needs an engine
	// with these extras; empty when none does.
	Field string
}

// Largest counts accepted: OpenAI's chat top_logprobs (20) and the
// logit_bias entries a GENERATE may carry.
const (
	maxTopLogprobs = 20
	maxLogitBias   = 4096
)

// extraFields are the OpenAI fields that make Extras; Logprobs is read per
// endpoint (a number for completions, a boolean for chat).
type extraFields struct {
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	MinTokens         *int64             `json:"min_tokens"`
	Logprobs          json.RawMessage    `json:"logprobs"`
	TopLogprobs       *int64             `json:"top_logprobs"`
	BestOf            *int64             `json:"best_of"`
}

// set records field as needing the extras, if none came before.
func (x *Extras) set(field string) {
	if x.Field == "" {
		x.Field = field
	}
}

// extras range-checks the fields into r.Extras; maxTokens bounds
// min_tokens, n is the request's choices.
func (f *extraFields) extras(k Kind, maxTokens uint32, n int) (Extras, *Error) {
	var x Extras
	if e := x.penalty("presence_penalty", f.PresencePenalty, -2, 2, &x.PresencePenalty, 0); e != nil {
		return x, e
	}
	if e := x.penalty("frequency_penalty", f.FrequencyPenalty, -2, 2, &x.FrequencyPenalty, 0); e != nil {
		return x, e
	}
	if e := x.penalty("repetition_penalty", f.RepetitionPenalty, 0, 2, &x.RepetitionPenalty, 1); e != nil {
		return x, e
	}
	if e := x.logitBias(f.LogitBias); e != nil {
		return x, e
	}
	if f.MinTokens != nil {
		if *f.MinTokens < 0 || *f.MinTokens > int64(maxTokens) {
			return x, BadRequest("min_tokens", "min_tokens must be between 0 and max_tokens")
		}
		if x.MinTokens = uint32(*f.MinTokens); x.MinTokens > 0 {
			x.set("min_tokens")
		}
	}
	if e := f.logprobs(k, &x); e != nil {
		return x, e
	}
	if f.BestOf != nil && *f.BestOf != int64(n) {
		return x, BadRequest("best_of", fmt.Sprintf("best_of must equal n (%d): choosing the best of more completions than are returned is not supported", n))
	}
	return x, nil
}

// penalty range-checks a penalty v (nil: not given) into dst; one other
// than off needs the extras.
func (x *Extras) penalty(field string, v *float64, lo, hi float64, dst *float32, off float64) *Error {
	if v == nil { // not given, as in most requests: this much is inlined
		return nil
	}
	return x.setPenalty(field, *v, lo, hi, dst, off)
}

// setPenalty is penalty of a penalty given.
func (x *Extras) setPenalty(field string, v, lo, hi float64, dst *float32, off float64) *Error {
	if !(v >= lo && v <= hi) || (field == "repetition_penalty" && v == 0) {
		return BadRequest(field, fmt.Sprintf("%s must be between %g and %g", field, lo, hi))
	}
	*dst = float32(v)
	if v != off {
		x.set(field)
	}
	return nil
}

func (x *Extras) logitBias(m map[string]float64) *Error {
	if len(m) == 0 {
		return nil
	}
	if len(m) > maxLogitBias {
		return BadRequest("logit_bias", fmt.Sprintf("logit_bias has %d entries, over %d", len(m), maxLogitBias))
	}
	type pair struct {
		id   uint32
		bias float64
	}
	pairs := make([]pair, 0, len(m))
	for k, b := range m {
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil {
			return BadRequest("logit_bias", fmt.Sprintf("logit_bias key %q is not a token id", k))
		}
		if !(b >= -100 && b <= 100) {
			return BadRequest("logit_bias", fmt.Sprintf("logit_bias of token %d must be between -100 and 100", id))
		}
		pairs = append(pairs, pair{uint32(id), b})
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(a.id, b.id) })
	for i, p := range pairs {
		if i > 0 && pairs[i-1].id == p.id {
			return BadRequest("logit_bias", fmt.Sprintf("logit_bias names token %d twice", p.id))
		}
		x.BiasTokens, x.Bias = append(x.BiasTokens, p.id), append(x.Bias, float32(p.bias))
	}
	x.set("logit_bias")
	return nil
}

// logprobs reads chat's logprobs (a boolean) with top_logprobs, or a
// completion's logprobs (the number of alternatives).
func (f *extraFields) logprobs(k Kind, x *Extras) *Error {
	given := len(f.Logprobs) > 0 && string(f.Logprobs) != "null"
	if k == Completion {
		if f.TopLogprobs != nil {
			return BadRequest("top_logprobs", "top_logprobs is a chat field; completions take logprobs as a number")
		}
		if !given {
			return nil
		}
		var n int64
		if json.Unmarshal(f.Logprobs, &n) != nil || n < 0 || n > maxTopLogprobs {
			return BadRequest("logprobs", fmt.Sprintf("logprobs must be an integer between 0 and %d", maxTopLogprobs))
		}
		x.Logprobs, x.TopLogprobs = true, int(n)
		x.set("logprobs")
		return nil
	}
	if given {
		var ok bool
		if x.Logprobs, ok = jsonBool(f.Logprobs); !ok {
			return BadRequest("logprobs", "field \"logprobs\" must be a boolean")
		}
	}
	if f.TopLogprobs != nil {
		if *f.TopLogprobs < 0 || *f.TopLogprobs > maxTopLogprobs {
			return BadRequest("top_logprobs", fmt.Sprintf("top_logprobs must be between 0 and %d", maxTopLogprobs))
		}
		if !x.Logprobs && *f.TopLogprobs > 0 {
			return BadRequest("top_logprobs", "top_logprobs needs logprobs set to true")
		}
		x.TopLogprobs = int(*f.TopLogprobs)
	}
	if x.Logprobs {
		x.set("logprobs")
	}
	return nil
}

// jsonBool reads a JSON boolean as encoding/json does (out of line, so a
// caller's Extras does not move to the heap for encoding/json's sake).
func jsonBool(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	var v bool // on the heap only here, where encoding/json takes it
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}

// foreignFields are OpenAI sampling and output fields a client may send to
// an API that has no such thing (Anthropic has no logprobs or penalties,
// and refuses fields it does not know; the Responses API here takes none
// of them): they are refused by name rather than dropped.
type foreignFields struct {
	Logprobs          json.RawMessage `json:"logprobs"`
	TopLogprobs       json.RawMessage `json:"top_logprobs"`
	PresencePenalty   json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty  json.RawMessage `json:"frequency_penalty"`
	RepetitionPenalty json.RawMessage `json:"repetition_penalty"`
	LogitBias         json.RawMessage `json:"logit_bias"`
	MinTokens         json.RawMessage `json:"min_tokens"`
	N                 json.RawMessage `json:"n"`
	BestOf            json.RawMessage `json:"best_of"`
	Echo              json.RawMessage `json:"echo"`
}

// refuse answers 400 naming the first field present; api names the
// endpoint in the message.
func (f *foreignFields) refuse(api string) *Error {
	for _, c := range []struct {
		name string
		raw  json.RawMessage
	}{{"logprobs", f.Logprobs}, {"top_logprobs", f.TopLogprobs}, {"presence_penalty", f.PresencePenalty},
		{"frequency_penalty", f.FrequencyPenalty}, {"repetition_penalty", f.RepetitionPenalty},
		{"logit_bias", f.LogitBias}, {"min_tokens", f.MinTokens}, {"n", f.N}, {"best_of", f.BestOf}, {"echo", f.Echo}} {
		if len(c.raw) > 0 && string(c.raw) != "null" {
			return BadRequest(c.name, fmt.Sprintf("%s has no field %q (it is OpenAI's Chat and Completions)", api, c.name))
		}
	}
	return nil
}

// slot is the field that stores key, nil for a key not here (the fast
// decoder's lookup, decode_anthropic.go).
func (f *foreignFields) slot(key string) *json.RawMessage {
	switch key {
	case "logprobs":
		return &f.Logprobs
	case "top_logprobs":
		return &f.TopLogprobs
	case "presence_penalty":
		return &f.PresencePenalty
	case "frequency_penalty":
		return &f.FrequencyPenalty
	case "repetition_penalty":
		return &f.RepetitionPenalty
	case "logit_bias":
		return &f.LogitBias
	case "min_tokens":
		return &f.MinTokens
	case "n":
		return &f.N
	case "best_of":
		return &f.BestOf
	case "echo":
		return &f.Echo
	}
	return nil
}
