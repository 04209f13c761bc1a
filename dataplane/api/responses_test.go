package api

import "testing"

func TestDecodeResponses(t *testing.T) {
	r, e := DecodeResponses([]byte(`{"model":"m","instructions":"Be brief.","max_output_tokens":7,"reasoning":{"effort":"none"},
		"text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}},
		"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],
		"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"x\":1}"},{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"},
			{"type":"function_call_output","call_id":"c1","output":"one"},{"type":"reasoning","id":"rs_1","summary":[]}]}`), nil)
	if e != nil {
		t.Fatal(e)
	}
	wantMsgs := `[{"role":"system","content":"Be brief."},{"role":"user","content":"a\nb"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"x":1}}},{"id":"c2","type":"function","function":{"name":"f","arguments":{}}}]},` +
		`{"role":"tool","content":"one","tool_call_id":"c1"}]`
	if string(r.Conversation.Messages) != wantMsgs || r.MaxTokens != 7 || r.Kind != Responses ||
		string(r.Conversation.Kwargs["enable_thinking"]) != "false" ||
		string(r.Guided) != `{"response_format":{"json_schema":{"name":"w","schema":{"type":"object"},"strict":true},"type":"json_schema"}}` ||
		string(r.Conversation.Tools) != `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]` {
		t.Fatalf("%+v\nmessages %s\nguided %s\ntools %s", r, r.Conversation.Messages, r.Guided, r.Conversation.Tools)
	}
	for _, c := range []struct{ body, param string }{
		{`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type"},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema","schema":{"type":"strin"}}}}`, "text.format.schema.type"},
		{`{"model":"m","input":[{"type":"image_generation_call"}]}`, "input[0].type"},
		{`{"model":"m","input":[]}`, "input"},
		{`{"model":"m","input":"x","background":true}`, "background"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tool_choice":{"type":"function","name":"g"},"tools":[{"type":"function","name":"f"}]}`, "tool_choice"},
	} {
		if _, e := DecodeResponses([]byte(c.body), nil); e == nil || e.Status != 400 || e.Param != c.param {
			t.Errorf("%s: %+v, want a 400 naming %s", c.body, e, c.param)
		}
	}
}
