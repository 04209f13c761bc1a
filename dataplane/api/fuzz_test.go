package api

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// Seeds are request bodies as the official SDKs and common clients send
// them (openai-node, @anthropic-ai/sdk, vLLM's benchmark clients, curl
// examples), plus the shapes kvgate refuses.
var fuzzSeeds = []string{
	`{"model":"Qwen/Qwen3-8B","prompt":"Hello","max_tokens":16,"temperature":0}`,
	`{"model":"Qwen/Qwen3-8B","prompt":[151644,872,198],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"m","prompt":[[1,2,3]],"stop":["\n\n","###"],"seed":7,"ignore_eos":true,"top_k":-1,"n":1}`,
	`{"messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi"}],"model":"gpt-4o-mini","stream":true}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"max_completion_tokens":64,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
	`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}},"chat_template_kwargs":{"enable_thinking":false}}`,
	`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}],"stream":true,"metadata":{"user_id":"u"},"stop_sequences":["END"]}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`,
	`{"model":"m","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"P"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"no"}]},{"type":"text","text":"again"}]}]}`,
	`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"w?"}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"reasoning":{"effort":"low"},"stream":true}`,
	`{"model":"Qwen/Qwen2.5-VL-7B-Instruct","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"auto"}},{"type":"text","text":"What is this?"}]}]}`,
	`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://upload.example/cat.jpg"}},{"type":"text","text":"and?"}]}]}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://upload.example/cat.jpg","detail":"low"},{"type":"input_text","text":"w?"}]}]}`,
	`{"prompt":"hello","add_special_tokens":false}`,
	`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":true}`,
	`{"tokens":[1,2,3]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":5,"presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"50256":-100,"13":5},"n":3,"seed":1}`,
	`{"model":"m","prompt":"x","logprobs":3,"echo":false,"best_of":2,"n":2,"min_tokens":4,"max_tokens":8,"repetition_penalty":1.1}`,
	``, `{`, `[]`, `null`, `{"model":"m","prompt":"x"} {}`, `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
}

// FuzzDecode runs every decoder on the same bytes: each must return a
// request or a 4xx error naming what is wrong, never panic; what it accepts
// is in range, and its conversation is valid JSON that normalizes to itself.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, decode := range []func([]byte, ModelCheck) (*Request, *Error){DecodeCompletion, DecodeChat, DecodeMessages, DecodeResponses} {
			r, e := decode(body, nil)
			if (r == nil) == (e == nil) {
				t.Fatalf("request %v and error %v", r, e)
			}
			if e != nil {
				if e.Status != 400 || e.Message == "" {
					t.Fatalf("error %+v", e)
				}
				continue
			}
			checkRequest(t, r)
		}
		if r, e := DecodeTokenize(body); e == nil && r.Prompt == nil {
			checkConversation(t, &r.Conversation)
		} else if e != nil && e.Status != 400 {
			t.Fatalf("tokenize error %+v", e)
		}
		if _, e := DecodeDetokenize(body); e != nil && e.Status != 400 {
			t.Fatalf("detokenize error %+v", e)
		}
	})
}

func checkRequest(t *testing.T, r *Request) {
	t.Helper()
	if r.Model == "" || r.MaxTokens < 1 || r.MaxTokens > maxMaxTokens || r.Temperature < 0 || r.Temperature > 2 ||
		r.TopP <= 0 || r.TopP > 1 || r.TopK < -1 || r.TopK > 1<<20 || len(r.Stop) > maxStops {
		t.Fatalf("out of range: %+v", r)
	}
	x := &r.Extras
	if x.PresencePenalty < -2 || x.PresencePenalty > 2 || x.FrequencyPenalty < -2 || x.FrequencyPenalty > 2 ||
		x.RepetitionPenalty < 0 || x.RepetitionPenalty > 2 || x.MinTokens > r.MaxTokens || x.TopLogprobs < 0 ||
		x.TopLogprobs > maxTopLogprobs || (x.TopLogprobs > 0 && !x.Logprobs) || len(x.Bias) != len(x.BiasTokens) ||
		!slices.IsSorted(x.BiasTokens) || r.N < 0 || r.N > maxChoices || (r.Echo && x.Logprobs) {
		t.Fatalf("extras out of range: %+v n %d", x, r.N)
	}
	for _, b := range x.Bias {
		if b < -100 || b > 100 {
			t.Fatalf("bias %v", b)
		}
	}
	if r.Guided != nil && !json.Valid(r.Guided) {
		t.Fatalf("guided %q", r.Guided)
	}
	if r.Kind != Completion {
		checkConversation(t, &r.Conversation)
	}
}

func checkConversation(t *testing.T, c *Conversation) {
	t.Helper()
	if !json.Valid(c.Messages) {
		t.Fatalf("messages not JSON: %q", c.Messages)
	}
	again, err := normalizeMessages(c.Messages, &imageSink{placed: true})
	if err != nil || !bytes.Equal(again, c.Messages) {
		t.Fatalf("normalizing twice: %v\n%s\n%s", err, c.Messages, again)
	}
	if n := bytes.Count(c.Messages, []byte(`{"type":"image"}`)); n != len(c.Images) {
		t.Fatalf("%d image parts, %d images", n, len(c.Images))
	}
}

// FuzzStopMatcher: the text let through plus what a stop cut is exactly
// the input up to the first stop string, however the input is split.
func FuzzStopMatcher(f *testing.F) {
	f.Add("Hello END world", "END", uint8(3))
	f.Add("日本語のテキスト。終わり", "終わり", uint8(5))
	f.Add("aaaa", "aab", uint8(1))
	f.Fuzz(func(t *testing.T, text, stop string, step uint8) {
		if stop == "" || step == 0 {
			return
		}
		m := NewStopMatcher([]string{stop})
		var out []byte
		stopped := false
		for i := 0; i < len(text) && !stopped; i += int(step) {
			end := min(i+int(step), len(text))
			var s string
			s, stopped = m.Feed(text[i:end], end == len(text))
			out = append(out, s...)
		}
		want := text
		if i := bytes.Index([]byte(text), []byte(stop)); i >= 0 {
			want = text[:i]
		}
		if string(out) != want || stopped != (len(want) < len(text)) {
			t.Fatalf("got %q stopped %v, want %q", out, stopped, want)
		}
	})
}
