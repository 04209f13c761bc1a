package api

import "encoding/json"

// AnthropicEncoder encodes Messages responses and their event stream
// (message_start, content_block_start, ping, content_block_delta...,
// content_block_stop, message_delta, message_stop).
type AnthropicEncoder struct {
	ID, Model string
	Stream    bool
	// PromptTokens goes into message_start's usage, before the engine
	// reports it.
	PromptTokens uint32
	text         []byte
}

// Streaming implements Encoder.
func (o *AnthropicEncoder) Streaming() bool { return o.Stream }

func sseEvent(dst []byte, event string, data any) []byte {
	b, _ := json.Marshal(data)
	dst = append(dst, "event: "...)
	dst = append(dst, event...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

func (o *AnthropicEncoder) message(content []any, stop any, u Usage) map[string]any {
	return map[string]any{"id": o.ID, "type": "message", "role": "assistant", "model": o.Model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Prompt, "output_tokens": u.Completion,
			"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0}}
}

// Open implements Encoder.
func (o *AnthropicEncoder) Open(dst []byte) []byte {
	if !o.Stream {
		return dst
	}
	dst = sseEvent(dst, "message_start", map[string]any{"type": "message_start",
		"message": o.message([]any{}, nil, Usage{Prompt: o.PromptTokens})})
	dst = sseEvent(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	return sseEvent(dst, "ping", map[string]any{"type": "ping"})
}

// Delta implements Encoder.
func (o *AnthropicEncoder) Delta(dst []byte, text string) []byte {
	if !o.Stream {
		o.text = append(o.text, text...)
		return dst
	}
	return sseEvent(dst, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": text}})
}

// stopReason is Anthropic's stop_reason for f.
func stopReason(f Finish) string {
	if f == FinishLength {
		return "max_tokens"
	}
	return "end_turn"
}

// Close implements Encoder.
func (o *AnthropicEncoder) Close(dst []byte, f Finish, u Usage) []byte {
	if !o.Stream {
		b, _ := json.Marshal(o.message([]any{map[string]any{"type": "text", "text": string(o.text)}}, stopReason(f), u))
		return append(dst, b...)
	}
	dst = sseEvent(dst, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	dst = sseEvent(dst, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(f), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Completion, "input_tokens": u.Prompt, "cache_read_input_tokens": u.Cached}})
	return sseEvent(dst, "message_stop", map[string]any{"type": "message_stop"})
}

// StreamError implements Encoder: an error event.
func (o *AnthropicEncoder) StreamError(dst []byte, e *Error) []byte {
	return sseEvent(dst, "error", json.RawMessage(e.Body(Anthropic)))
}
