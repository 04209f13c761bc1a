package api

import "encoding/json"

// TokenizeRequest is vLLM's POST /tokenize: a prompt or a conversation
// (messages with tools and chat_template_kwargs, rendered as a chat's).
type TokenizeRequest struct {
	Model string
	// Prompt is set for a prompt; Conversation otherwise.
	Prompt           *string
	AddSpecialTokens bool
	Conversation     Conversation
}

// DecodeTokenize decodes a POST /tokenize body.
func DecodeTokenize(body []byte) (*TokenizeRequest, *Error) {
	var b struct {
		Model              string                     `json:"model"`
		Prompt             *string                    `json:"prompt"`
		Messages           json.RawMessage            `json:"messages"`
		Tools              json.RawMessage            `json:"tools"`
		ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
		AddSpecialTokens   *bool                      `json:"add_special_tokens"`
		AddGeneration      *bool                      `json:"add_generation_prompt"`
	}
	if e := decodeJSON(body, &b); e != nil {
		return nil, e
	}
	r := &TokenizeRequest{Model: b.Model, Prompt: b.Prompt, AddSpecialTokens: b.AddSpecialTokens == nil || *b.AddSpecialTokens}
	switch {
	case b.Prompt != nil:
	case len(b.Messages) > 0:
		if _, e := checkOpenAITools(b.Tools); e != nil {
			return nil, e
		}
		var e *Error
		if r.Conversation, e = chatConversation(b.Messages, b.Tools, b.ChatTemplateKwargs, b.AddGeneration); e != nil {
			return nil, e
		}
	default:
		return nil, BadRequest("prompt", "either \"prompt\" or \"messages\" is required")
	}
	return r, nil
}

// EncodeTokenize is /tokenize's answer.
func EncodeTokenize(ids []uint32, maxModelLen int) []byte {
	if ids == nil {
		ids = []uint32{}
	}
	b, _ := json.Marshal(map[string]any{"tokens": ids, "count": len(ids), "max_model_len": maxModelLen})
	return b
}

// DecodeDetokenize decodes a POST /detokenize body: its token ids.
func DecodeDetokenize(body []byte) ([]uint32, *Error) {
	var b struct {
		Tokens []uint32 `json:"tokens"`
	}
	if e := decodeJSON(body, &b); e != nil {
		return nil, e
	}
	return b.Tokens, nil
}

// EncodeDetokenize is /detokenize's answer.
func EncodeDetokenize(text string) []byte {
	b, _ := json.Marshal(map[string]any{"prompt": text})
	return b
}
