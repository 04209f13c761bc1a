package dataplane

import (
	"encoding/json"
	"fmt"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// messages serves Anthropic's Messages API.
func (g *Gateway) messages(w *httpx.ResponseWriter, r *httpx.Request, reqID string) int {
	var body struct {
		Model         string          `json:"model"`
		System        json.RawMessage `json:"system"`
		Messages      json.RawMessage `json:"messages"`
		MaxTokens     *int64          `json:"max_tokens"`
		StopSequences []string        `json:"stop_sequences"`
		Temperature   *float64        `json:"temperature"`
		TopP          *float64        `json:"top_p"`
		TopK          *int64          `json:"top_k"`
		Stream        bool            `json:"stream"`
		Metadata      struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
		Tools json.RawMessage `json:"tools"`
	}
	fail := func(e *apiError) int { writeError(w, flavorAnthropic, e); return e.status }
	if e := decodeJSON(r.Body, &body); e != nil {
		return fail(e)
	}
	if body.MaxTokens == nil {
		return fail(badRequest("max_tokens", "max_tokens: field required"))
	}
	if body.Temperature != nil && (*body.Temperature < 0 || *body.Temperature > 1) {
		return fail(badRequest("temperature", "temperature: must be between 0 and 1"))
	}
	stop, _ := json.Marshal(body.StopSequences)
	f := samplingFields{Model: body.Model, MaxTokens: body.MaxTokens, Temperature: body.Temperature, TopP: body.TopP,
		TopK: body.TopK, Stop: stop, User: body.Metadata.UserID}
	req, e := g.toGen(&f, reqID, 0)
	if e != nil {
		return fail(e)
	}
	msgs, err := anthropicToChat(body.System, body.Messages)
	if err != nil {
		return fail(badRequest("messages", err.Error()))
	}
	if req.tokens, e = g.chatTokens(msgs, nil, nil, nil); e != nil {
		return fail(e)
	}
	if e := g.promptLimit(len(req.tokens)); e != nil {
		return fail(e)
	}
	if status, ok := g.passthrough(w, r, req, flavorAnthropic); ok {
		return status
	}
	out := &anthropicOut{w: w, id: "msg_" + reqID, model: req.model, stream: body.Stream, promptTokens: uint32(len(req.tokens))}
	return g.run(w, req, out)
}

// anthropicToChat prepends the system prompt (string or text blocks) as a
// system message; content blocks flatten like OpenAI content parts.
func anthropicToChat(system, messages json.RawMessage) (json.RawMessage, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(messages, &msgs); err != nil || len(msgs) == 0 {
		return nil, fmt.Errorf("messages: must be a non-empty list")
	}
	if len(system) > 0 && string(system) != "null" {
		flat, err := flattenContent(system)
		if err != nil {
			return nil, fmt.Errorf("system: %v", err)
		}
		sys, _ := json.Marshal(map[string]json.RawMessage{"role": json.RawMessage(`"system"`), "content": flat})
		msgs = append([]json.RawMessage{sys}, msgs...)
	}
	return json.Marshal(msgs)
}

// anthropicOut encodes Messages responses and their event stream.
type anthropicOut struct {
	w            *httpx.ResponseWriter
	id, model    string
	stream       bool
	started      bool
	text         []byte
	promptTokens uint32
}

func (o *anthropicOut) send(event string, data any) error {
	b, _ := json.Marshal(data)
	return o.w.Chunk([]byte("event: " + event + "\ndata: " + string(b) + "\n\n"))
}

func (o *anthropicOut) message(content []any, stop any, u usage) map[string]any {
	return map[string]any{"id": o.id, "type": "message", "role": "assistant", "model": o.model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.prompt, "output_tokens": u.completion,
			"cache_read_input_tokens": u.cached, "cache_creation_input_tokens": 0}}
}

func (o *anthropicOut) start(engineID string) error {
	o.started = true
	if err := beginResponse(o.w, engineID, o.stream); err != nil || !o.stream {
		return err
	}
	if err := o.send("message_start", map[string]any{"type": "message_start",
		"message": o.message([]any{}, nil, usage{prompt: o.promptTokens})}); err != nil {
		return err
	}
	if err := o.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}}); err != nil {
		return err
	}
	return o.send("ping", map[string]any{"type": "ping"})
}

func (o *anthropicOut) delta(text string) error {
	if !o.stream {
		o.text = append(o.text, text...)
		return nil
	}
	return o.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": text}})
}

func stopReason(reason string) string {
	if reason == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func (o *anthropicOut) finish(reason string, u usage) error {
	if !o.stream {
		b, _ := json.Marshal(o.message([]any{map[string]any{"type": "text", "text": string(o.text)}}, stopReason(reason), u))
		o.w.Header().Set("Content-Type", "application/json")
		o.w.WriteHeader(200)
		_, _ = o.w.Write(b)
		return o.w.Finish()
	}
	if err := o.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}); err != nil {
		return err
	}
	if err := o.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(reason), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.completion, "input_tokens": u.prompt, "cache_read_input_tokens": u.cached}}); err != nil {
		return err
	}
	if err := o.send("message_stop", map[string]any{"type": "message_stop"}); err != nil {
		return err
	}
	return o.w.Finish()
}

func (o *anthropicOut) fail(e *apiError) {
	if !o.started || !o.stream {
		writeError(o.w, flavorAnthropic, e)
		return
	}
	var body map[string]any
	_ = json.Unmarshal(e.body(flavorAnthropic), &body)
	_ = o.send("error", body)
	_ = o.w.Finish()
}
