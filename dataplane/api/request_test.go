package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

func u64(v uint64) *uint64 { return &v }

// defaults is a request of kind k as decoded from {"model":"m", ...} with
// nothing else set.
func defaults(k Kind, maxTokens uint32) Request {
	return Request{Kind: k, Model: "m", MaxTokens: maxTokens, Temperature: 1, TopP: 1}
}

func TestDecodeCompletionFields(t *testing.T) {
	cases := []struct {
		name string
		body string
		want func(r *Request)
	}{
		{"defaults", `{"model":"m","prompt":"hi"}`, func(r *Request) {}},
		{"max_tokens", `{"model":"m","prompt":"hi","max_tokens":7}`, func(r *Request) { r.MaxTokens, r.MaxTokensGiven = 7, true }},
		{"max_completion_tokens wins", `{"model":"m","prompt":"hi","max_tokens":7,"max_completion_tokens":9}`, func(r *Request) { r.MaxTokens, r.MaxTokensGiven = 9, true }},
		{"temperature", `{"model":"m","prompt":"hi","temperature":0.5}`, func(r *Request) { r.Temperature = 0.5 }},
		{"temperature 0", `{"model":"m","prompt":"hi","temperature":0}`, func(r *Request) { r.Temperature = 0 }},
		{"top_p", `{"model":"m","prompt":"hi","top_p":0.25}`, func(r *Request) { r.TopP = 0.25 }},
		{"top_k", `{"model":"m","prompt":"hi","top_k":40}`, func(r *Request) { r.TopK = 40 }},
		{"top_k clamped high", `{"model":"m","prompt":"hi","top_k":99999999}`, func(r *Request) { r.TopK = 1 << 20 }},
		{"top_k clamped low", `{"model":"m","prompt":"hi","top_k":-5}`, func(r *Request) { r.TopK = -1 }},
		{"seed", `{"model":"m","prompt":"hi","seed":42}`, func(r *Request) { r.Seed = u64(42) }},
		{"stop string", `{"model":"m","prompt":"hi","stop":"\n"}`, func(r *Request) { r.Stop = []string{"\n"} }},
		{"stop list", `{"model":"m","prompt":"hi","stop":["a","b"]}`, func(r *Request) { r.Stop = []string{"a", "b"} }},
		{"stop null", `{"model":"m","prompt":"hi","stop":null}`, func(r *Request) {}},
		{"stop_token_ids", `{"model":"m","prompt":"hi","stop_token_ids":[1,2]}`, func(r *Request) { r.StopTokenIDs = []uint32{1, 2} }},
		{"ignore_eos", `{"model":"m","prompt":"hi","ignore_eos":true}`, func(r *Request) { r.IgnoreEOS = true }},
		{"n 1", `{"model":"m","prompt":"hi","n":1}`, func(r *Request) {}},
		{"stream", `{"model":"m","prompt":"hi","stream":true}`, func(r *Request) { r.Stream = true }},
		{"include_usage", `{"model":"m","prompt":"hi","stream":true,"stream_options":{"include_usage":true}}`, func(r *Request) { r.Stream, r.IncludeUsage = true, true }},
		{"user", `{"model":"m","prompt":"hi","user":"u1"}`, func(r *Request) { r.User = "u1" }},
		{"prompt list of one", `{"model":"m","prompt":["hi"]}`, func(r *Request) {}},
		{"prompt ids", `{"model":"m","prompt":[1,2,3]}`, func(r *Request) { r.Prompt = Prompt{IDs: []uint32{1, 2, 3}, IsIDs: true} }},
		{"prompt nested ids", `{"model":"m","prompt":[[4,5]]}`, func(r *Request) { r.Prompt = Prompt{IDs: []uint32{4, 5}, IsIDs: true} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, e := DecodeCompletion([]byte(c.body), nil)
			if e != nil {
				t.Fatalf("error %d %q", e.Status, e.Message)
			}
			want := defaults(Completion, defaultCompletionTokens)
			want.Prompt = Prompt{Text: "hi"}
			c.want(&want)
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestDecodeChatFields(t *testing.T) {
	msgs := `[{"role":"user","content":"hi"}]`
	tools := `,"tools":[{"type":"function","function":{"name":"f"}}]`
	cases := []struct {
		name string
		body string
		want func(r *Request)
	}{
		{"defaults", `{"model":"m","messages":` + msgs + `}`, func(r *Request) {}},
		{"max_tokens", `{"model":"m","messages":` + msgs + `,"max_tokens":3}`, func(r *Request) { r.MaxTokens, r.MaxTokensGiven = 3, true }},
		{"tools", `{"model":"m","messages":` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, func(r *Request) {
			r.Conversation.Tools = json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`)
		}},
		{"chat_template_kwargs", `{"model":"m","messages":` + msgs + `,"chat_template_kwargs":{"enable_thinking":false}}`, func(r *Request) {
			r.Conversation.Kwargs = map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}
		}},
		{"add_generation_prompt false", `{"model":"m","messages":` + msgs + `,"add_generation_prompt":false}`, func(r *Request) {
			r.Conversation.AddGenerationPrompt = false
		}},
		{"response_format text", `{"model":"m","messages":` + msgs + `,"response_format":{"type":"text"}}`, func(r *Request) {}},
		{"response_format json_object", `{"model":"m","messages":` + msgs + `,"response_format":{"type":"json_object"}}`, func(r *Request) {
			r.Guided = []byte(`{"response_format":{"type":"json_object"}}`)
		}},
		{"tool_choice auto", `{"model":"m","messages":` + msgs + `,"tool_choice":"auto"}`, func(r *Request) {}},
		{"tool_choice none", `{"model":"m","messages":` + msgs + `,"tool_choice":"none"}`, func(r *Request) { r.NoToolCalls = true }},
		{"tool_choice required", `{"model":"m","messages":` + msgs + `,"tool_choice":"required"` + tools + `}`, func(r *Request) {
			r.Guided = []byte(`{"tool_choice":"required"}`)
			r.Conversation.Tools = json.RawMessage(tools[9:])
		}},
		{"tool_choice named", `{"model":"m","messages":` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f"}}` + tools + `}`, func(r *Request) {
			r.Guided = []byte(`{"tool_choice":{"type":"function","function":{"name":"f"}}}`)
			r.Conversation.Tools = json.RawMessage(tools[9:])
		}},
		{"content parts flattened", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, func(r *Request) {
			r.Conversation.Messages = json.RawMessage(`[{"role":"user","content":"a\nb"}]`)
		}},
		{"other keys kept in order", `{"model":"m","messages":[{"name":"x","role":"tool","content":"r","tool_call_id":"c1"}]}`, func(r *Request) {
			r.Conversation.Messages = json.RawMessage(`[{"name":"x","role":"tool","content":"r","tool_call_id":"c1"}]`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, e := DecodeChat([]byte(c.body), nil)
			if e != nil {
				t.Fatalf("error %d %q", e.Status, e.Message)
			}
			want := defaults(Chat, defaultChatTokens)
			want.Conversation = Conversation{Messages: json.RawMessage(msgs), AddGenerationPrompt: true}
			c.want(&want)
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestDecodeMessagesFields(t *testing.T) {
	msgs := `[{"role":"user","content":"hi"}]`
	cases := []struct {
		name string
		body string
		want func(r *Request)
	}{
		{"defaults", `{"model":"m","max_tokens":5,"messages":` + msgs + `}`, func(r *Request) {}},
		{"system string", `{"model":"m","max_tokens":5,"system":"be brief","messages":` + msgs + `}`, func(r *Request) {
			r.Conversation.Messages = json.RawMessage(`[{"content":"be brief","role":"system"},{"role":"user","content":"hi"}]`)
		}},
		{"system blocks", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":` + msgs + `}`, func(r *Request) {
			r.Conversation.Messages = json.RawMessage(`[{"content":"a\nb","role":"system"},{"role":"user","content":"hi"}]`)
		}},
		{"content blocks", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, func(r *Request) {
			r.Conversation.Messages = json.RawMessage(`[{"role":"user","content":"x"}]`)
		}},
		{"stop_sequences", `{"model":"m","max_tokens":5,"stop_sequences":["END"],"messages":` + msgs + `}`, func(r *Request) { r.Stop = []string{"END"} }},
		{"temperature", `{"model":"m","max_tokens":5,"temperature":0.7,"messages":` + msgs + `}`, func(r *Request) { r.Temperature = 0.7 }},
		{"top_p", `{"model":"m","max_tokens":5,"top_p":0.9,"messages":` + msgs + `}`, func(r *Request) { r.TopP = 0.9 }},
		{"top_k", `{"model":"m","max_tokens":5,"top_k":10,"messages":` + msgs + `}`, func(r *Request) { r.TopK = 10 }},
		{"stream", `{"model":"m","max_tokens":5,"stream":true,"messages":` + msgs + `}`, func(r *Request) { r.Stream = true }},
		{"metadata.user_id", `{"model":"m","max_tokens":5,"metadata":{"user_id":"u9"},"messages":` + msgs + `}`, func(r *Request) { r.User = "u9" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, e := DecodeMessages([]byte(c.body), nil)
			if e != nil {
				t.Fatalf("error %d %q", e.Status, e.Message)
			}
			want := defaults(Messages, 5)
			want.MaxTokensGiven = true // Anthropic requires it
			// Thinking is off unless asked for (Qwen3's enable_thinking).
			want.Conversation = Conversation{Messages: json.RawMessage(msgs), AddGenerationPrompt: true,
				Kwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}}
			c.want(&want)
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestDecodeTokenize(t *testing.T) {
	prompt := "hello"
	cases := []struct {
		name string
		body string
		want TokenizeRequest
	}{
		{"prompt", `{"model":"m","prompt":"hello"}`, TokenizeRequest{Model: "m", Prompt: &prompt, AddSpecialTokens: true}},
		{"prompt without special tokens", `{"prompt":"hello","add_special_tokens":false}`, TokenizeRequest{Prompt: &prompt}},
		{"messages", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, TokenizeRequest{AddSpecialTokens: true,
			Conversation: Conversation{Messages: json.RawMessage(`[{"role":"user","content":"x"}]`), AddGenerationPrompt: true}}},
		{"messages without generation prompt", `{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}`, TokenizeRequest{AddSpecialTokens: true,
			Conversation: Conversation{Messages: json.RawMessage(`[{"role":"user","content":"x"}]`)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, e := DecodeTokenize([]byte(c.body))
			if e != nil {
				t.Fatalf("error %d %q", e.Status, e.Message)
			}
			if !reflect.DeepEqual(*got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, c.want)
			}
		})
	}
	ids, e := DecodeDetokenize([]byte(`{"tokens":[9,8]}`))
	if e != nil || !reflect.DeepEqual(ids, []uint32{9, 8}) {
		t.Fatalf("detokenize: %v %v", ids, e)
	}
}

func TestKindStrings(t *testing.T) {
	for k, want := range map[Kind]string{Completion: "completions", Chat: "chat.completions", Messages: "messages"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
	if Messages.Flavor() != Anthropic || Chat.Flavor() != OpenAI || Completion.Flavor() != OpenAI {
		t.Error("flavors")
	}
	if OpenAI.String() != "openai" || Anthropic.String() != "anthropic" {
		t.Error("flavor names")
	}
	for f, want := range map[Finish]string{FinishStop: "stop", FinishLength: "length", FinishAbort: "abort"} {
		if f.String() != want {
			t.Errorf("finish %d: %q", f, f.String())
		}
	}
}

// TestModelCheckComesFirst: an unknown model is answered as such even when
// other fields are wrong too, and a known one goes on to the other checks.
func TestModelCheckComesFirst(t *testing.T) {
	check := func(m string) *Error {
		if m != "known" {
			return NotFound("model " + m)
		}
		return nil
	}
	decoders := map[string]func([]byte, ModelCheck) (*Request, *Error){
		"completions": DecodeCompletion, "chat": DecodeChat, "messages": DecodeMessages}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			_, e := decode([]byte(`{"model":"other","max_tokens":5,"temperature":9,"messages":[]}`), check)
			if e == nil || e.Status != 404 {
				t.Fatalf("unknown model: %+v", e)
			}
			_, e = decode([]byte(`{"model":"known","max_tokens":5,"temperature":9,"messages":[]}`), check)
			if e == nil || e.Status != 400 || e.Param != "temperature" {
				t.Fatalf("known model, bad temperature: %+v", e)
			}
		})
	}
}

// TestAnthropicHistory: an assistant turn's thinking, text and tool_use
// blocks become one chat message (reasoning_content, content, tool_calls
// with the input as an object); tool_results come before the rest of the
// user's turn, as tool messages naming the function.
func TestAnthropicHistory(t *testing.T) {
	r, e := DecodeMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"w?"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Let me see."},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},
		{"role":"user","content":[{"type":"text","text":"and?"},{"type":"tool_result","tool_use_id":"t1","content":"42"}]}]}`), nil)
	if e != nil {
		t.Fatal(e)
	}
	want := `[{"role":"user","content":"w?"},` +
		`{"role":"assistant","content":"Let me see.","reasoning_content":"hmm","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},` +
		`{"role":"tool","content":"42","tool_call_id":"t1","name":"f"},{"role":"user","content":"and?"}]`
	if string(r.Conversation.Messages) != want {
		t.Fatalf("messages\n got %s\nwant %s", r.Conversation.Messages, want)
	}
}
