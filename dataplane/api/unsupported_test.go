package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

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

// TestUnsupportedNoneSeesEveryField: refuse's shortcut (none) looks at
// every field of unsupportedFields, and every field is in refuse's table
// and in the fast decoder's slot, so a field added to one and not the
// others fails here.
func TestUnsupportedNoneSeesEveryField(t *testing.T) {
	var f unsupportedFields
	if !f.none() {
		t.Fatal("none is false for an empty set")
	}
	v := reflect.ValueOf(&f).Elem()
	names := map[string]bool{}
	for _, c := range unsupportedDefaults {
		names[c.name] = true
	}
	for i := range v.NumField() {
		field := v.Type().Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		v.Field(i).Set(reflect.ValueOf(json.RawMessage(`1`)))
		if f.none() {
			t.Errorf("none misses %s", name)
		}
		if !names[name] {
			t.Errorf("%s is not in unsupportedDefaults", name)
		}
		if f.slot(name) != v.Field(i).Addr().Interface() {
			t.Errorf("slot(%q) is not the field %s", name, field.Name)
		}
		v.Field(i).Set(reflect.Zero(field.Type))
	}
	if len(names) != v.NumField() {
		t.Errorf("unsupportedDefaults has %d fields, the struct %d", len(names), v.NumField())
	}
}
