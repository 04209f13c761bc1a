package api

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDecodeErrors: every refusal of every decoder, with the field it
// names and its status.
func TestDecodeErrors(t *testing.T) {
	type decoder func([]byte) *Error
	completion := func(b []byte) *Error { _, e := DecodeCompletion(b, nil); return e }
	chat := func(b []byte) *Error { _, e := DecodeChat(b, nil); return e }
	messages := func(b []byte) *Error { _, e := DecodeMessages(b, nil); return e }
	tokenize := func(b []byte) *Error { _, e := DecodeTokenize(b); return e }
	detokenize := func(b []byte) *Error { _, e := DecodeDetokenize(b); return e }
	user := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name   string
		decode decoder
		body   string
		param  string
		msg    string // a part of the message
	}{
		{"empty body", completion, "  ", "", "request body is empty"},
		{"not JSON", completion, "{", "", "malformed JSON"},
		{"trailing data", completion, `{"model":"m","prompt":"x"} {}`, "", "data after the object"},
		{"wrong type", completion, `{"model":3,"prompt":"x"}`, "model", `field "model" must be a string`},
		{"max_tokens type", chat, `{"model":"m","max_tokens":"x",` + user + `}`, "max_tokens", "must be an integer"},
		{"no model", completion, `{"prompt":"x"}`, "model", `"model" is required`},
		{"n 17", completion, `{"model":"m","prompt":"x","n":17}`, "n", "between 1 and 16"},
		{"max_tokens 0", completion, `{"model":"m","prompt":"x","max_tokens":0}`, "max_tokens", "between 1 and 16777216"},
		{"max_tokens huge", chat, `{"model":"m","max_tokens":16777217,` + user + `}`, "max_tokens", "between 1 and 16777216"},
		{"temperature high", completion, `{"model":"m","prompt":"x","temperature":2.5}`, "temperature", "between 0 and 2"},
		{"temperature negative", chat, `{"model":"m","temperature":-1,` + user + `}`, "temperature", "between 0 and 2"},
		{"top_p 0", completion, `{"model":"m","prompt":"x","top_p":0}`, "top_p", "(0, 1]"},
		{"top_p high", completion, `{"model":"m","prompt":"x","top_p":1.5}`, "top_p", "(0, 1]"},
		{"stop number", completion, `{"model":"m","prompt":"x","stop":5}`, "stop", "string or a list"},
		{"stop too many", completion, `{"model":"m","prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`, "stop", "at most 16"},
		{"no prompt", completion, `{"model":"m"}`, "prompt", `"prompt" is required`},
		{"prompt batch", completion, `{"model":"m","prompt":["a","b"]}`, "prompt", "exactly one element"},
		{"prompt object", completion, `{"model":"m","prompt":{"a":1}}`, "prompt", "must be a string"},
		{"prompt nested batch", completion, `{"model":"m","prompt":[[1],[2]]}`, "prompt", "must be a string"},
		{"no messages", chat, `{"model":"m"}`, "messages", "non-empty list"},
		{"messages empty", chat, `{"model":"m","messages":[]}`, "messages", "non-empty list"},
		{"message not object", chat, `{"model":"m","messages":["hi"]}`, "messages", "messages[0] must be an object"},
		{"bad role", chat, `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages", `role "robot" is not`},
		{"role not string", chat, `{"model":"m","messages":[{"role":1,"content":"x"}]}`, "messages", "role must be a string"},
		{"image part", chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0]", `must be a data: URL or an http(s) URL`},
		{"part not object", chat, `{"model":"m","messages":[{"role":"user","content":[1]}]}`, "messages", "content parts must be objects"},
		{"response_format type", chat, `{"model":"m","response_format":{"type":"xml"},` + user + `}`, "response_format", `"xml" is not text`},
		{"response_format not object", chat, `{"model":"m","response_format":"json",` + user + `}`, "response_format", "must be an object"},
		{"tool_choice word", chat, `{"model":"m","tool_choice":"always",` + user + `}`, "tool_choice", `"always" is not auto`},
		{"anthropic max_tokens missing", messages, `{"model":"m",` + user + `}`, "max_tokens", "field required"},
		{"anthropic temperature", messages, `{"model":"m","max_tokens":5,"temperature":1.5,` + user + `}`, "temperature", "between 0 and 1"},
		{"anthropic no model", messages, `{"max_tokens":5,` + user + `}`, "model", `"model" is required`},
		{"anthropic messages empty", messages, `{"model":"m","max_tokens":5,"messages":[]}`, "messages", "non-empty list"},
		{"anthropic system bad", messages, `{"model":"m","max_tokens":5,"system":[{"type":"image"}],` + user + `}`, "system", "system:"},
		{"anthropic system number", messages, `{"model":"m","max_tokens":5,"system":5,` + user + `}`, "system", "must be a string or an array of text blocks"},
		{"anthropic system object", messages, `{"model":"m","max_tokens":5,"system":{"a":1},` + user + `}`, "system", "must be a string or an array of text blocks"},
		{"anthropic tools string", messages, `{"model":"m","max_tokens":5,"tools":"x",` + user + `}`, "tools", "must be an array of objects"},
		{"anthropic tools of numbers", messages, `{"model":"m","max_tokens":5,"tools":[1],` + user + `}`, "tools", "tools[0] must be an object"},
		{"chat tools object", chat, `{"model":"m","tools":{"type":"function"},` + user + `}`, "tools", "must be an array of objects"},
		{"chat tools of strings", chat, `{"model":"m","tools":["f"],` + user + `}`, "tools", "tools[0] must be an object"},
		{"stop_token_ids strings", chat, `{"model":"m","stop_token_ids":["a"],` + user + `}`, "stop_token_ids", "must be a non-negative integer"},
		{"prompt ids negative", completion, `{"model":"m","prompt":[-1]}`, "prompt", "must be a string"},
		{"tokenize prompt number", tokenize, `{"prompt":5}`, "prompt", "must be a string"},
		{"anthropic image block", messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "messages.0.content.0", `source type "" is not supported (base64, url)`},
		{"anthropic tool_use from the user", messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, "messages.0.content.0", "belong to assistant"},
		{"anthropic tool_result unmatched", messages, `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"x"}]}]}`, "messages.1.content.0.tool_use_id", `"t2" matches no tool_use`},
		{"anthropic schema not an object", messages, `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":"x"}],` + user + `}`, "tools.0.input_schema", "must be a JSON Schema object"},
		{"anthropic schema of a string", messages, `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"string"}}],` + user + `}`, "tools.0.input_schema.type", `must be "object"`},
		{"anthropic schema bad property", messages, `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"type":"strin"}}}}],` + user + `}`, "tools.0.input_schema.properties.a.type", `"strin" is not a JSON Schema type`},
		{"anthropic tool without name", messages, `{"model":"m","max_tokens":5,"tools":[{"input_schema":{"type":"object"}}],` + user + `}`, "tools.0.name", "Field required"},
		{"anthropic tool_choice unknown tool", messages, `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"},` + user + `}`, "tool_choice", `"g", which is not among the tools`},
		{"anthropic thinking type", messages, `{"model":"m","max_tokens":5,"thinking":{"type":"on"},` + user + `}`, "thinking.type", "is not enabled or disabled"},
		{"openai tool message without id", chat, `{"model":"m","messages":[{"role":"tool","content":"r"}]}`, "messages[0].tool_call_id", "needs the tool_call_id"},
		{"openai schema required not a list", chat, `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","required":"a"}}}],` + user + `}`, "tools[0].function.parameters.required", "must be a list"},
		{"openai schema items", chat, `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"l":{"type":"array","items":5}}}}}],` + user + `}`, "tools[0].function.parameters.properties.l.items", "must be a JSON Schema object"},
		{"openai tool type", chat, `{"model":"m","tools":[{"type":"fn","function":{"name":"f"}}],` + user + `}`, "tools[0].type", `must be "function"`},
		{"openai arguments not JSON", chat, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, "messages[0].tool_calls[0].function.arguments", "must be a JSON object"},
		{"tokenize bad tools", tokenize, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "must be a JSON Schema object"},
		{"tokenize neither", tokenize, `{"model":"m"}`, "prompt", `either "prompt" or "messages"`},
		{"tokenize bad messages", tokenize, `{"messages":[{"role":"x"}]}`, "messages", "is not system"},
		{"detokenize type", detokenize, `{"tokens":"abc"}`, "tokens", "must be"},
		{"detokenize negative", detokenize, `{"tokens":[-1]}`, "tokens", "must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.decode([]byte(c.body))
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %d param %q %q; want 400 param %q containing %q", e.Status, e.Param, e.Message, c.param, c.msg)
			}
			if goType.MatchString(e.Message) {
				t.Fatalf("the message shows a Go type: %q", e.Message)
			}
		})
	}
}

// goType matches what Go type names look like in a message.
var goType = regexp.MustCompile(`\b(u?int(8|16|32|64)?\b|float(32|64)|json\.\w+|api\.\w+|struct|\[\]\w+|map\[)`)

// TestErrorBodies: each status in both APIs' shapes.
func TestErrorBodies(t *testing.T) {
	cases := []struct {
		name      string
		err       *Error
		openai    string
		anthropic string
	}{
		{"bad request", BadRequest("stop", "bad stop"),
			`{"error":{"code":null,"message":"bad stop","param":"stop","type":"invalid_request_error"}}`,
			`{"error":{"message":"bad stop","type":"invalid_request_error"},"type":"error"}`},
		{"auth", &Error{Status: 401, Type: "authentication_error", Message: "no key"},
			`{"error":{"code":null,"message":"no key","param":null,"type":"authentication_error"}}`,
			`{"error":{"message":"no key","type":"authentication_error"},"type":"error"}`},
		{"not found", NotFound("no model"),
			`{"error":{"code":null,"message":"no model","param":null,"type":"not_found_error"}}`,
			`{"error":{"message":"no model","type":"not_found_error"},"type":"error"}`},
		{"method", &Error{Status: 405, Message: "no"},
			`{"error":{"code":null,"message":"no","param":null,"type":"invalid_request_error"}}`,
			`{"error":{"message":"no","type":"invalid_request_error"},"type":"error"}`},
		{"too large", &Error{Status: 413, Message: "big"},
			`{"error":{"code":null,"message":"big","param":null,"type":"invalid_request_error"}}`,
			`{"error":{"message":"big","type":"request_too_large"},"type":"error"}`},
		{"rate limit", &Error{Status: 429, Type: "rate_limit_error", Message: "full", RetryAfter: 1},
			`{"error":{"code":null,"message":"full","param":null,"type":"rate_limit_error"}}`,
			`{"error":{"message":"full","type":"rate_limit_error"},"type":"error"}`},
		{"server error", &Error{Status: 500, Type: "whatever", Message: "oops"},
			`{"error":{"code":null,"message":"oops","param":null,"type":"server_error"}}`,
			`{"error":{"message":"oops","type":"api_error"},"type":"error"}`},
		{"bad gateway", &Error{Status: 502, Message: "engine died"},
			`{"error":{"code":null,"message":"engine died","param":null,"type":"server_error"}}`,
			`{"error":{"message":"engine died","type":"api_error"},"type":"error"}`},
		{"unavailable", &Error{Status: 503, Message: "none ready", RetryAfter: 1},
			`{"error":{"code":null,"message":"none ready","param":null,"type":"server_error"}}`,
			`{"error":{"message":"none ready","type":"overloaded_error"},"type":"error"}`},
		{"timeout", &Error{Status: 504, Message: "late"},
			`{"error":{"code":null,"message":"late","param":null,"type":"server_error"}}`,
			`{"error":{"message":"late","type":"api_error"},"type":"error"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(c.err.Body(OpenAI)); got != c.openai {
				t.Errorf("openai\n got %s\nwant %s", got, c.openai)
			}
			if got := string(c.err.Body(Anthropic)); got != c.anthropic {
				t.Errorf("anthropic\n got %s\nwant %s", got, c.anthropic)
			}
			var v map[string]any
			if json.Unmarshal(c.err.Body(OpenAI), &v) != nil || json.Unmarshal(c.err.Body(Anthropic), &v) != nil {
				t.Error("not JSON")
			}
		})
	}
	if (&Error{RetryAfter: 2}).RetryAfterHeader() != "2" || (&Error{}).RetryAfterHeader() != "" {
		t.Error("Retry-After")
	}
	if e := BadRequest("p", "m"); e.Error() != "m" || !reflect.DeepEqual(e, &Error{Status: 400, Type: "invalid_request_error", Message: "m", Param: "p"}) {
		t.Errorf("BadRequest: %+v", e)
	}
}
