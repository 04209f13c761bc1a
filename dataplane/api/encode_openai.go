package api

import (
	"encoding/json"
	"strings"
)

// OpenAIEncoder encodes Completions and Chat Completions responses and
// their server-sent event streams.
type OpenAIEncoder struct {
	ID, Model string
	Created   int64
	// Chat selects chat.completion(.chunk) over text_completion.
	Chat, Stream bool
	// IncludeUsage adds the usage chunk at the end of a stream
	// (stream_options.include_usage).
	IncludeUsage bool
	text         strings.Builder
}

func (o *OpenAIEncoder) object() string {
	switch {
	case o.Chat && o.Stream:
		return "chat.completion.chunk"
	case o.Chat:
		return "chat.completion"
	}
	return "text_completion"
}

// Streaming implements Encoder.
func (o *OpenAIEncoder) Streaming() bool { return o.Stream }

// Open implements Encoder: a chat stream starts with the assistant role.
func (o *OpenAIEncoder) Open(dst []byte) []byte {
	if !o.Stream || !o.Chat {
		return dst
	}
	return o.event(dst, map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""},
		"logprobs": nil, "finish_reason": nil}, nil)
}

func (o *OpenAIEncoder) choice(text string, finish any) map[string]any {
	if o.Chat {
		delta := map[string]any{}
		if text != "" {
			delta["content"] = text
		}
		return map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
	}
	return map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": finish}
}

func (o *OpenAIEncoder) event(dst []byte, choice map[string]any, u *Usage) []byte {
	m := map[string]any{"id": o.ID, "object": o.object(), "created": o.Created, "model": o.Model}
	if choice != nil {
		m["choices"] = []any{choice}
	} else {
		m["choices"] = []any{}
	}
	if u != nil {
		m["usage"] = openAIUsage(*u)
	}
	b, _ := json.Marshal(m)
	return sseData(dst, b)
}

// sseData appends one "data:" event.
func sseData(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}

// Delta implements Encoder.
func (o *OpenAIEncoder) Delta(dst []byte, text string) []byte {
	if !o.Stream {
		o.text.WriteString(text)
		return dst
	}
	return o.event(dst, o.choice(text, nil), nil)
}

func openAIUsage(u Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion,
		"total_tokens": u.Prompt + u.Completion, "prompt_tokens_details": map[string]any{"cached_tokens": u.Cached}}
}

// Close implements Encoder.
func (o *OpenAIEncoder) Close(dst []byte, f Finish, u Usage) []byte {
	reason := f.String()
	if !o.Stream {
		choice := map[string]any{"index": 0, "text": o.text.String(), "logprobs": nil, "finish_reason": reason}
		if o.Chat {
			choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": o.text.String()},
				"logprobs": nil, "finish_reason": reason}
		}
		b, _ := json.Marshal(map[string]any{"id": o.ID, "object": o.object(), "created": o.Created, "model": o.Model,
			"choices": []any{choice}, "usage": openAIUsage(u)})
		return append(dst, b...)
	}
	dst = o.event(dst, o.choice("", reason), nil)
	if o.IncludeUsage {
		dst = o.event(dst, nil, &u)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// StreamError implements Encoder: the error body as an event, then [DONE].
func (o *OpenAIEncoder) StreamError(dst []byte, e *Error) []byte {
	dst = sseData(dst, e.Body(OpenAI))
	return append(dst, "data: [DONE]\n\n"...)
}
