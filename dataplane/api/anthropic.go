package api

import (
	"encoding/json"
	"fmt"
)

// DecodeMessages decodes an Anthropic POST /v1/messages body.
func DecodeMessages(body []byte, check ModelCheck) (*Request, *Error) {
	var b messagesBody
	if e := b.decode(body); e != nil {
		return nil, e
	}
	if e := b.foreignFields.refuse("the Messages API"); e != nil {
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
	tools, names, e := anthropicTools(b.Tools)
	if e != nil {
		return nil, e
	}
	choice, e := anthropicToolChoice(b.ToolChoice)
	if e != nil {
		return nil, e
	}
	if e = checkToolChoice(r, choice, names); e != nil {
		return nil, e
	}
	if r.Guided, e = guidedOf(nil, choice); e != nil {
		return nil, e
	}
	if e = checkSystem(b.System); e != nil {
		return nil, e
	}
	kwargs, e := thinkingKwargs(b.Thinking)
	if e != nil {
		return nil, e
	}
	sink := &imageSink{}
	msgs, err := anthropicMessages(b.System, b.Messages, sink)
	if err != nil {
		return nil, badRequestOf("messages", err)
	}
	sink.placed = true
	if msgs, err = normalizeMessages(msgs, sink); err != nil {
		return nil, badRequestOf("messages", err)
	}
	r.Conversation = Conversation{Messages: msgs, Tools: tools, Kwargs: kwargs, AddGenerationPrompt: true, Images: sink.images}
	return r, nil
}

// thinkingKwargs maps Anthropic's thinking onto the template's
// enable_thinking (Qwen3's switch): a model thinks only when asked to.
func thinkingKwargs(t *thinkingField) (map[string]json.RawMessage, *Error) {
	on := false
	if t != nil {
		switch t.Type {
		case "enabled", "adaptive":
			on = true
		case "disabled":
		default:
			return nil, BadRequest("thinking.type", fmt.Sprintf("thinking.type %q is not enabled or disabled", t.Type))
		}
	}
	return map[string]json.RawMessage{"enable_thinking": mustJSON(on)}, nil
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
	if _, err := flattenContent(raw, "system", nil); err != nil {
		return BadRequest("system", "system: "+err.Error())
	}
	return nil
}
