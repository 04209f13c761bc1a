package api

import (
	"encoding/json"
	"fmt"
)

// unsupportedFields are OpenAI and vLLM request fields that would change
// the output and that kvgate does not implement: a request that sets one
// to anything but its default is refused naming it, never answered as if
// it had been honoured. Defaults (min_p 0, use_beam_search false,
// skip_special_tokens true, ...) are accepted, as clients send them.
type unsupportedFields struct {
	MinP                    json.RawMessage `json:"min_p"`
	PromptLogprobs          json.RawMessage `json:"prompt_logprobs"`
	UseBeamSearch           json.RawMessage `json:"use_beam_search"`
	AllowedTokenIDs         json.RawMessage `json:"allowed_token_ids"`
	BadWords                json.RawMessage `json:"bad_words"`
	IncludeStopStrInOutput  json.RawMessage `json:"include_stop_str_in_output"`
	SkipSpecialTokens       json.RawMessage `json:"skip_special_tokens"`
	TruncatePromptTokens    json.RawMessage `json:"truncate_prompt_tokens"`
	Functions               json.RawMessage `json:"functions"`
	FunctionCall            json.RawMessage `json:"function_call"`
	Audio                   json.RawMessage `json:"audio"`
	WebSearchOptions        json.RawMessage `json:"web_search_options"`
	LogitsProcessors        json.RawMessage `json:"logits_processors"`
	StructuredOutputs       json.RawMessage `json:"structured_outputs"`
	GuidedJSON              json.RawMessage `json:"guided_json"`
	GuidedRegex             json.RawMessage `json:"guided_regex"`
	GuidedChoice            json.RawMessage `json:"guided_choice"`
	ContinueFinalMessage    json.RawMessage `json:"continue_final_message"`
	SpacesBetweenSpecialTok json.RawMessage `json:"spaces_between_special_tokens"`
}

// unsupportedDefaults are the unsupported fields in the order refuse
// checks them, each with the values that mean "not used".
var unsupportedDefaults = []struct {
	name string
	def  []string
}{
	{"min_p", []string{"0", "0.0"}},
	{"prompt_logprobs", nil},
	{"use_beam_search", []string{"false"}},
	{"allowed_token_ids", []string{"[]"}},
	{"bad_words", []string{"[]"}},
	{"include_stop_str_in_output", []string{"false"}},
	{"skip_special_tokens", []string{"true"}},
	{"spaces_between_special_tokens", []string{"true"}},
	{"truncate_prompt_tokens", nil},
	{"functions", []string{"[]"}},
	{"function_call", nil},
	{"audio", nil},
	{"web_search_options", nil},
	{"logits_processors", []string{"[]"}},
	{"structured_outputs", nil},
	{"guided_json", nil},
	{"guided_regex", nil},
	{"guided_choice", nil},
	{"continue_final_message", []string{"false"}},
}

// refuse answers 400 naming the first field set to other than its
// default (null counts as unset everywhere).
func (f *unsupportedFields) refuse() *Error {
	if f.none() {
		return nil
	}
	for _, c := range unsupportedDefaults {
		if isDefault(*f.slot(c.name), c.def) {
			continue
		}
		return BadRequest(c.name, fmt.Sprintf("%s is not supported here (only its default, or leaving it out, is accepted)", c.name))
	}
	return nil
}

// none reports whether the body set none of the fields, as almost every
// body does: refuse's table walk looked each one up by name.
// TestUnsupportedNoneSeesEveryField holds it to the struct.
func (f *unsupportedFields) none() bool {
	return len(f.MinP)+len(f.PromptLogprobs)+len(f.UseBeamSearch)+len(f.AllowedTokenIDs)+len(f.BadWords)+
		len(f.IncludeStopStrInOutput)+len(f.SkipSpecialTokens)+len(f.TruncatePromptTokens)+len(f.Functions)+
		len(f.FunctionCall)+len(f.Audio)+len(f.WebSearchOptions)+len(f.LogitsProcessors)+len(f.StructuredOutputs)+
		len(f.GuidedJSON)+len(f.GuidedRegex)+len(f.GuidedChoice)+len(f.ContinueFinalMessage)+
		len(f.SpacesBetweenSpecialTok) == 0
}

// isDefault reports whether raw is absent, null, or one of def (compared
// as compact JSON).
func isDefault(raw json.RawMessage, def []string) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	compact, _ := json.Marshal(v)
	for _, d := range def {
		if string(compact) == d {
			return true
		}
	}
	return false
}

// slot is the field that stores key, nil for a key not here (the fast
// decoder's lookup, decode_fields.go).
func (f *unsupportedFields) slot(key string) *json.RawMessage {
	switch key {
	case "min_p":
		return &f.MinP
	case "prompt_logprobs":
		return &f.PromptLogprobs
	case "use_beam_search":
		return &f.UseBeamSearch
	case "allowed_token_ids":
		return &f.AllowedTokenIDs
	case "bad_words":
		return &f.BadWords
	case "include_stop_str_in_output":
		return &f.IncludeStopStrInOutput
	case "skip_special_tokens":
		return &f.SkipSpecialTokens
	case "truncate_prompt_tokens":
		return &f.TruncatePromptTokens
	case "functions":
		return &f.Functions
	case "function_call":
		return &f.FunctionCall
	case "audio":
		return &f.Audio
	case "web_search_options":
		return &f.WebSearchOptions
	case "logits_processors":
		return &f.LogitsProcessors
	case "structured_outputs":
		return &f.StructuredOutputs
	case "guided_json":
		return &f.GuidedJSON
	case "guided_regex":
		return &f.GuidedRegex
	case "guided_choice":
		return &f.GuidedChoice
	case "continue_final_message":
		return &f.ContinueFinalMessage
	case "spaces_between_special_tokens":
		return &f.SpacesBetweenSpecialTok
	}
	return nil
}
