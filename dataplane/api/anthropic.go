package api

import (
	"encoding/json"
	"fmt"
)

// DecodeMessages decodes an Anthropic POST /v1/messages body.
func DecodeMessages(body []byte, check ModelCheck) (*Request, *Error) {
	var b struct {
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
	if e := decodeJSON(body, &b); e != nil {
		return nil, e
	}
	if b.Model != "" && check != nil {
		if e := check(b.Model); e != nil {
			return nil, e
		}
	}
	if b.MaxTokens == nil {
		return nil, BadRequest("max_tokens", "max_tokens: field required")
	}
	if b.Temperature != nil && (*b.Temperature < 0 || *b.Temperature > 1) {
		return nil, BadRequest("temperature", "temperature: must be between 0 and 1")
	}
	stop, _ := json.Marshal(b.StopSequences)
	f := sampling{Model: b.Model, MaxTokens: b.MaxTokens, Temperature: b.Temperature, TopP: b.TopP,
		TopK: b.TopK, Stop: stop, User: b.Metadata.UserID, Stream: b.Stream}
	r, e := f.request(Messages, 0, nil)
	if e != nil {
		return nil, e
	}
	if e = checkArrayOfObjects("tools", b.Tools); e != nil {
		return nil, e
	}
	if e = checkSystem(b.System); e != nil {
		return nil, e
	}
	msgs, err := anthropicToChat(b.System, b.Messages)
	if err != nil {
		return nil, BadRequest("messages", err.Error())
	}
	if msgs, err = normalizeMessages(msgs); err != nil {
		return nil, BadRequest("messages", err.Error())
	}
	r.Conversation = Conversation{Messages: msgs, AddGenerationPrompt: true}
	return r, nil
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

// checkSystem refuses a system prompt that is neither a string nor a list
// of text blocks.
func checkSystem(raw json.RawMessage) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	if raw[0] != '[' {
		return BadRequest("system", `field "system" must be a string or an array of text blocks`)
	}
	if _, err := flattenContent(raw); err != nil {
		return BadRequest("system", "system: "+err.Error())
	}
	return nil
}
