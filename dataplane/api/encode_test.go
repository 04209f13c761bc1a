package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// render drives an encoder through a whole response: open, two deltas,
// close.
func render(enc Encoder, f Finish) string {
	b := enc.Open(nil)
	b = enc.Delta(b, Piece{Text: "Hel"})
	b = enc.Delta(b, Piece{Text: "lo"})
	return string(enc.Close(b, End{Finish: f, Usage: Usage{Prompt: 10, Completion: 2, Cached: 8}}))
}

// sseData returns the JSON of each data: event, and [DONE] as a string.
func dataEvents(t *testing.T, stream string) []any {
	t.Helper()
	var out []any
	for _, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		for _, line := range strings.Split(ev, "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			if d == "[DONE]" {
				out = append(out, d)
				continue
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(d), &v); err != nil {
				t.Fatalf("event %q: %v", d, err)
			}
			out = append(out, v)
		}
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOpenAIEncoder(t *testing.T) {
	cases := []struct {
		name string
		enc  *OpenAIEncoder
		f    Finish
		want []string // each event's JSON, or the body
	}{
		{"completion", &OpenAIEncoder{ID: "cmpl-1", Model: "m", Created: 5}, FinishLength, []string{
			`{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"text":"Hello"}],"created":5,"id":"cmpl-1","model":"m","object":"text_completion","usage":{"completion_tokens":2,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":8},"total_tokens":12}}`}},
		{"chat", &OpenAIEncoder{ID: "c", Model: "m", Created: 5, Chat: true}, FinishStop, []string{
			`{"choices":[{"finish_reason":"stop","index":0,"logprobs":null,"message":{"content":"Hello","role":"assistant"}}],"created":5,"id":"c","model":"m","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":8},"total_tokens":12}}`}},
		{"completion stream", &OpenAIEncoder{ID: "s", Model: "m", Created: 5, Stream: true}, FinishStop, []string{
			`{"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":"Hel"}],"created":5,"id":"s","model":"m","object":"text_completion"}`,
			`{"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":"lo"}],"created":5,"id":"s","model":"m","object":"text_completion"}`,
			`{"choices":[{"finish_reason":"stop","index":0,"logprobs":null,"text":""}],"created":5,"id":"s","model":"m","object":"text_completion"}`,
			`"[DONE]"`}},
		{"chat stream with usage", &OpenAIEncoder{ID: "s", Model: "m", Created: 5, Chat: true, Stream: true, IncludeUsage: true}, FinishAbort, []string{
			`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":5,"id":"s","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"content":"Hel"},"finish_reason":null,"index":0,"logprobs":null}],"created":5,"id":"s","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"content":"lo"},"finish_reason":null,"index":0,"logprobs":null}],"created":5,"id":"s","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{},"finish_reason":"abort","index":0,"logprobs":null}],"created":5,"id":"s","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[],"created":5,"id":"s","model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":8},"total_tokens":12}}`,
			`"[DONE]"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := render(c.enc, c.f)
			var got []string
			if c.enc.Streaming() {
				for _, ev := range dataEvents(t, out) {
					got = append(got, jsonOf(t, ev))
				}
			} else {
				got = []string{out}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
	stream := string((&OpenAIEncoder{Stream: true}).StreamError(nil, &Error{Status: 502, Message: "engine died"}))
	if stream != "data: {\"error\":{\"code\":null,\"message\":\"engine died\",\"param\":null,\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n" {
		t.Fatalf("stream error %q", stream)
	}
}

func TestAnthropicEncoder(t *testing.T) {
	whole := render(&AnthropicEncoder{ID: "msg_1", Model: "m"}, FinishLength)
	want := `{"content":[{"text":"Hello","type":"text"}],"id":"msg_1","model":"m","role":"assistant","stop_reason":"max_tokens","stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":8,"input_tokens":10,"output_tokens":2}}`
	if whole != want {
		t.Fatalf("whole\n got %s\nwant %s", whole, want)
	}
	stream := render(&AnthropicEncoder{ID: "msg_2", Model: "m", Stream: true, PromptTokens: 10}, FinishStop)
	var kinds []string
	for _, ev := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		var v map[string]any
		if !ok || json.Unmarshal([]byte(data), &v) != nil || "event: "+v["type"].(string) != name {
			t.Fatalf("event %q", ev)
		}
		kinds = append(kinds, v["type"].(string))
		switch v["type"] {
		case "message_start":
			if u := v["message"].(map[string]any)["usage"].(map[string]any); u["input_tokens"] != 10.0 {
				t.Fatalf("message_start usage %v", u)
			}
		case "message_delta":
			if jsonOf(t, v["delta"]) != `{"stop_reason":"end_turn","stop_sequence":null}` || v["usage"].(map[string]any)["output_tokens"] != 2.0 {
				t.Fatalf("message_delta %v", v)
			}
		}
	}
	if strings.Join(kinds, " ") != "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("events %v", kinds)
	}
	errEv := string((&AnthropicEncoder{Stream: true}).StreamError(nil, &Error{Status: 503, Message: "busy"}))
	if errEv != "event: error\ndata: {\"error\":{\"message\":\"busy\",\"type\":\"overloaded_error\"},\"type\":\"error\"}\n\n" {
		t.Fatalf("stream error %q", errEv)
	}
}

func TestEncodeOthers(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"tokenize", string(EncodeTokenize([]uint32{1, 2}, 4096)), `{"count":2,"max_model_len":4096,"tokens":[1,2]}`},
		{"tokenize empty", string(EncodeTokenize(nil, 0)), `{"count":0,"max_model_len":0,"tokens":[]}`},
		{"detokenize", string(EncodeDetokenize("hi")), `{"prompt":"hi"}`},
		{"models", string(EncodeModels([]Model{{ID: "base"}, {ID: "lora", Parent: "base"}})),
			`{"data":[{"created":0,"id":"base","object":"model","owned_by":"kvgate"},{"created":0,"id":"lora","object":"model","owned_by":"kvgate","parent":"base"}],"object":"list"}`},
		{"no models", string(EncodeModels(nil)), `{"data":[],"object":"list"}`},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
}

func TestStopMatcher(t *testing.T) {
	cases := []struct {
		name    string
		stops   []string
		chunks  []string
		want    string
		stopped bool
	}{
		{"none", nil, []string{"ab", "cd"}, "abcd", false},
		{"in one chunk", []string{"END"}, []string{"abENDcd"}, "ab", true},
		{"across chunks", []string{"END"}, []string{"abE", "N", "Dxx"}, "ab", true},
		{"held back then released", []string{"END"}, []string{"abEN", "x"}, "abENx", false},
		{"earliest of several", []string{"zz", "b"}, []string{"abzz"}, "a", true},
		{"empty stop ignored", []string{""}, []string{"ab"}, "ab", false},
		{"utf-8 kept whole", []string{"終わり"}, []string{"日本", "語終", "わり"}, "日本語", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewStopMatcher(c.stops)
			var got strings.Builder
			stopped := false
			for i, ch := range c.chunks {
				s, st := m.Feed(ch, i == len(c.chunks)-1)
				got.WriteString(s)
				if st {
					stopped = true
					break
				}
			}
			if got.String() != c.want || stopped != c.stopped {
				t.Fatalf("got %q %v, want %q %v", got.String(), stopped, c.want, c.stopped)
			}
		})
	}
}
