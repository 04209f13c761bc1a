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

// refuse answers 400 naming the first field set to other than its
// default (null counts as unset everywhere).
func (f *unsupportedFields) refuse() *Error {
	for _, c := range []struct {
		name string
		raw  json.RawMessage
		def  []string // the values that mean "not used"
	}{
		{"min_p", f.MinP, []string{"0", "0.0"}},
		{"prompt_logprobs", f.PromptLogprobs, nil},
		{"use_beam_search", f.UseBeamSearch, []string{"false"}},
		{"allowed_token_ids", f.AllowedTokenIDs, []string{"[]"}},
		{"bad_words", f.BadWords, []string{"[]"}},
		{"include_stop_str_in_output", f.IncludeStopStrInOutput, []string{"false"}},
		{"skip_special_tokens", f.SkipSpecialTokens, []string{"true"}},
		{"spaces_between_special_tokens", f.SpacesBetweenSpecialTok, []string{"true"}},
		{"truncate_prompt_tokens", f.TruncatePromptTokens, nil},
		{"functions", f.Functions, []string{"[]"}},
		{"function_call", f.FunctionCall, nil},
		{"audio", f.Audio, nil},
		{"web_search_options", f.WebSearchOptions, nil},
		{"logits_processors", f.LogitsProcessors, []string{"[]"}},
		{"structured_outputs", f.StructuredOutputs, nil},
		{"guided_json", f.GuidedJSON, nil},
		{"guided_regex", f.GuidedRegex, nil},
		{"guided_choice", f.GuidedChoice, nil},
		{"continue_final_message", f.ContinueFinalMessage, []string{"false"}},
	} {
		if isDefault(c.raw, c.def) {
			continue
		}
		return BadRequest(c.name, fmt.Sprintf("%s is not supported here (only its default, or leaving it out, is accepted)", c.name))
	}
	return nil
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
