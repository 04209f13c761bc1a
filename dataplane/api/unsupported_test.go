package api

import "testing"

// A field kvgate does not implement is refused naming it unless it holds
// its default, which clients send and which changes nothing.
func TestUnsupportedFields(t *testing.T) {
	chat := func(extra string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],` + extra + `}`)
	}
	for _, c := range []struct{ extra, field string }{
		{`"min_p":0.1`, "min_p"},
		{`"prompt_logprobs":1`, "prompt_logprobs"},
		{`"use_beam_search":true`, "use_beam_search"},
		{`"allowed_token_ids":[1,2]`, "allowed_token_ids"},
		{`"bad_words":["x"]`, "bad_words"},
		{`"include_stop_str_in_output":true`, "include_stop_str_in_output"},
		{`"skip_special_tokens":false`, "skip_special_tokens"},
		{`"truncate_prompt_tokens":5`, "truncate_prompt_tokens"},
		{`"functions":[{"name":"f"}]`, "functions"},
		{`"function_call":"auto"`, "function_call"},
		{`"guided_json":{}`, "guided_json"},
		{`"structured_outputs":{"regex":"a"}`, "structured_outputs"},
	} {
		if _, e := DecodeChat(chat(c.extra), nil); e == nil || e.Status != 400 || e.Param != c.field {
			t.Errorf("%s: got %+v, want 400 naming %s", c.extra, e, c.field)
		}
	}
	defaults := `"min_p":0,"prompt_logprobs":null,"use_beam_search":false,"allowed_token_ids":[],"bad_words":[],` +
		`"include_stop_str_in_output":false,"skip_special_tokens":true,"spaces_between_special_tokens":true,"functions":[],"continue_final_message":false`
	if _, e := DecodeChat(chat(defaults), nil); e != nil {
		t.Fatalf("defaults refused: %+v", e)
	}
	if _, e := DecodeCompletion([]byte(`{"model":"m","prompt":"x","min_p":0.5}`), nil); e == nil || e.Param != "min_p" {
		t.Fatalf("completion min_p: %+v", e)
	}
}
