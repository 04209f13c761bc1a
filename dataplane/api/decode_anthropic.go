package api

import (
	"encoding/json"
	"reflect"
)

// messagesBody is an Anthropic POST /v1/messages body.
type messagesBody struct {
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
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	foreignFields
	Thinking *thinkingField `json:"thinking"`
}

// thinkingField is Anthropic's extended-thinking switch.
type thinkingField struct {
	Type string `json:"type"`
}

var messagesKeys = jsonKeys(reflect.TypeFor[messagesBody]())

// decode fills b from body as completionBody's does.
func (b *messagesBody) decode(body []byte) *Error {
	if b.walk(body) {
		return nil
	}
	return decodeSlow(body, b)
}

// walk fills b by the walker; false: body is not plain.
func (b *messagesBody) walk(body []byte) bool {
	w := jsonWalker{b: body}
	for w.next() {
		if !b.field(w.key, w.val) {
			return false
		}
	}
	return w.ended() && w.atEnd()
}

func (b *messagesBody) field(key, v []byte) bool {
	switch string(key) {
	case "model":
		return fastString(v, &b.Model)
	case "system":
		return fastRaw(v, &b.System)
	case "messages":
		return fastRaw(v, &b.Messages)
	case "max_tokens":
		return fastInt64Ptr(v, &b.MaxTokens)
	case "stop_sequences":
		return fastJSON(v, &b.StopSequences)
	case "temperature":
		return fastFloat64Ptr(v, &b.Temperature)
	case "top_p":
		return fastFloat64Ptr(v, &b.TopP)
	case "top_k":
		return fastInt64Ptr(v, &b.TopK)
	case "stream":
		return fastBool(v, &b.Stream)
	case "metadata":
		return fastJSON(v, &b.Metadata)
	case "tools":
		return fastRaw(v, &b.Tools)
	case "tool_choice":
		return fastRaw(v, &b.ToolChoice)
	case "thinking":
		return fastJSON(v, &b.Thinking)
	}
	if raw := b.foreignFields.slot(string(key)); raw != nil {
		*raw = v
		return true
	}
	return ignorable(key, messagesKeys)
}
