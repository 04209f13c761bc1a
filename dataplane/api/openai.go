package api

import (
	"encoding/json"
	"fmt"
)

// Default max_tokens of OpenAI's endpoints when the client gives none:
// the Completions API documents 16; for chat vLLM takes what the context
// leaves, which a router cannot know, so a generous fixed limit.
const (
	defaultCompletionTokens = 16
	defaultChatTokens       = 4096
)

// DecodeCompletion decodes a POST /v1/completions body.
func DecodeCompletion(body []byte, check ModelCheck) (*Request, *Error) {
	var b completionBody
	if e := b.decode(body); e != nil {
		return nil, e
	}
	r, e := b.sampling.request(Completion, defaultCompletionTokens, check)
	if e != nil {
		return nil, e
	}
	if r.Prompt, e = decodePrompt(b.Prompt); e != nil {
		return nil, e
	}
	if b.Suffix != nil && *b.Suffix != "" {
		return nil, BadRequest("suffix", "suffix (insertion) is not supported")
	}
	if b.Echo && r.Extras.Logprobs {
		return nil, BadRequest("echo", "echo with logprobs needs the prompt's logprobs, which engines do not return; ask for one or the other")
	}
	r.Echo = b.Echo
	return r, nil
}

// decodePrompt reads a completions prompt: a string, a list of one string,
// token ids, or a list of one list of token ids. Batches are refused.
func decodePrompt(raw json.RawMessage) (Prompt, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return Prompt{}, BadRequest("prompt", "field \"prompt\" is required")
	}
	var s string
	if raw[0] == '"' && fastString(raw, &s) {
		return Prompt{Text: s}, nil
	}
	var ids []uint32
	if raw[0] == '[' && fastUint32s(raw, &ids) && len(ids) > 0 { // what the list of ids below reads
		return Prompt{IDs: ids, IsIDs: true}, nil
	}
	return decodePromptJSON(raw)
}

// decodePromptJSON is decodePrompt by encoding/json (out of line: its
// variables go to the heap, where encoding/json takes them, only here).
func decodePromptJSON(raw json.RawMessage) (Prompt, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return Prompt{Text: s}, nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		if len(ss) != 1 {
			return Prompt{}, BadRequest("prompt", "a list of prompts must have exactly one element (batching is not supported)")
		}
		return Prompt{Text: ss[0]}, nil
	}
	var ids []uint32
	if json.Unmarshal(raw, &ids) == nil {
		return Prompt{IDs: ids, IsIDs: true}, nil
	}
	var nested [][]uint32
	if json.Unmarshal(raw, &nested) == nil && len(nested) == 1 {
		return Prompt{IDs: nested[0], IsIDs: true}, nil
	}
	return Prompt{}, BadRequest("prompt", "prompt must be a string, a list of one string, or a list of token ids")
}

// DecodeChat decodes a POST /v1/chat/completions body.
func DecodeChat(body []byte, check ModelCheck) (*Request, *Error) {
	var b chatBody
	if e := b.decode(body); e != nil {
		return nil, e
	}
	r, e := b.sampling.request(Chat, defaultChatTokens, check)
	if e != nil {
		return nil, e
	}
	if r.Guided, e = guidedOf(b.ResponseFormat, b.ToolChoice); e != nil {
		return nil, e
	}
	names, e := checkOpenAITools(b.Tools)
	if e != nil {
		return nil, e
	}
	if e = checkToolChoice(r, b.ToolChoice, names); e != nil {
		return nil, e
	}
	sink := &imageSink{}
	msgs, err := b.messages(sink)
	if err != nil {
		return nil, badRequestOf("messages", err)
	}
	r.Conversation = conversationOf(msgs, b.Tools, b.ChatTemplateKwargs, b.AddGenerationPrompt, sink)
	return r, nil
}

// chatConversation is what the template renders of /tokenize's messages,
// which must give the same ids as a chat's: images are read as a chat's
// are, and the gateway places their tokens (as vLLM's /tokenize does).
func chatConversation(messages, tools json.RawMessage, kwargs map[string]json.RawMessage, addGeneration *bool) (Conversation, *Error) {
	sink := &imageSink{}
	msgs, err := normalizeMessages(messages, sink)
	if err != nil {
		return Conversation{}, badRequestOf("messages", err)
	}
	return conversationOf(msgs, tools, kwargs, addGeneration, sink), nil
}

// conversationOf is what the template renders of an OpenAI chat whose
// messages are normalized (msgs), its images read into sink (nil: none).
func conversationOf(msgs, tools json.RawMessage, kwargs map[string]json.RawMessage, addGeneration *bool, sink *imageSink) Conversation {
	c := Conversation{Messages: msgs, Tools: tools, Kwargs: kwargs, AddGenerationPrompt: addGeneration == nil || *addGeneration}
	if sink != nil {
		c.Images = sink.images
	}
	return c
}

// guidedOf builds the structured-output constraint the engine must honour:
// a response_format other than text, or a tool_choice that forces a call
// ("required" or a named function). "auto" and "none" constrain nothing:
// tools reach the model through the chat template.
func guidedOf(responseFormat, toolChoice json.RawMessage) ([]byte, *Error) {
	g := map[string]json.RawMessage{}
	if len(responseFormat) > 0 && string(responseFormat) != "null" {
		var rf struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(responseFormat, &rf); err != nil {
			return nil, BadRequest("response_format", "response_format must be an object with a type")
		}
		switch rf.Type {
		case "text":
		case "json_object", "json_schema":
			g["response_format"] = responseFormat
		default:
			return nil, BadRequest("response_format", fmt.Sprintf("response_format type %q is not text, json_object or json_schema", rf.Type))
		}
	}
	if len(toolChoice) > 0 && string(toolChoice) != "null" {
		var s string
		if json.Unmarshal(toolChoice, &s) == nil {
			switch s {
			case "auto", "none":
			case "required":
				g["tool_choice"] = toolChoice
			default:
				return nil, BadRequest("tool_choice", fmt.Sprintf("tool_choice %q is not auto, none or required", s))
			}
		} else {
			g["tool_choice"] = toolChoice // a named function
		}
	}
	if len(g) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(g)
	return b, nil
}
