package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kvgate/kvgate/dataplane/media"
)

// Anthropic content blocks become the chat messages templates render, as
// the model's own format expects them (HF transformers' tool-use
// convention, which vLLM follows): an assistant's tool_use blocks its
// message's tool_calls (arguments as an object), its thinking blocks its
// reasoning_content, each tool_result a message of role tool with
// tool_call_id and the function's name, before the rest of the user's
// turn. A tool_result with is_error true reads "Error: " before its
// content, the only way a chat format without an error flag can tell the
// model.

// block is one Anthropic content block.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Source    json.RawMessage `json:"source"`
}

// chatMessage is a message as the template gets it.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Reasoning  string         `json:"reasoning_content,omitempty"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
	// Parts, when set, are the content instead of Content: the text and
	// image parts of a message with images (MarshalJSON, media.go).
	Parts []contentPart `json:"-"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// anthropicMessages converts Anthropic's system and messages into chat
// messages, reading their image blocks into sink.
func anthropicMessages(system, messages json.RawMessage, sink *imageSink) (json.RawMessage, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(messages, &raws); err != nil || len(raws) == 0 {
		return nil, fmt.Errorf("messages: must be a non-empty list")
	}
	var out []json.RawMessage
	if len(system) > 0 && string(system) != "null" {
		flat, err := flattenContent(system, "system", nil)
		if err != nil {
			return nil, fmt.Errorf("system: %v", err)
		}
		sys, _ := json.Marshal(map[string]json.RawMessage{"role": json.RawMessage(`"system"`), "content": flat})
		out = append(out, sys)
	}
	uses := map[string]string{} // tool_use id -> function name
	for i, raw := range raws {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil || len(m.Content) == 0 || m.Content[0] != '[' {
			out = append(out, raw) // checked as a chat message next
			continue
		}
		var blocks []block
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, fmt.Errorf("messages.%d.content: must be a list of content blocks", i)
		}
		converted, err := convertBlocks(m.Role, blocks, i, uses, sink)
		if err != nil {
			return nil, err
		}
		for _, c := range converted {
			b, _ := json.Marshal(c)
			out = append(out, b)
		}
	}
	return json.Marshal(out)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// convertBlocks turns one message's blocks into chat messages, its
// images read into sink.
func convertBlocks(role string, blocks []block, i int, uses map[string]string, sink *imageSink) ([]chatMessage, error) {
	var out []chatMessage
	var texts, thinking []string
	var parts []contentPart // texts and images in order, when there are images
	images := 0
	main := chatMessage{Role: role}
	for j, b := range blocks {
		field := fmt.Sprintf("messages.%d.content.%d", i, j)
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
			parts = append(parts, textPart(b.Text))
		case "image":
			if role != "user" {
				return nil, fieldErrorf(field, "image blocks belong to user messages")
			}
			src, err := media.ParseAnthropicImage(b.Source)
			if err := sink.addImage(field, src, err); err != nil {
				return nil, err
			}
			parts = append(parts, contentPart{Type: "image"})
			images++
		case "thinking":
			thinking = append(thinking, b.Thinking)
		case "redacted_thinking":
		case "tool_use":
			if role != "assistant" {
				return nil, fieldErrorf(field, "tool_use blocks belong to assistant messages")
			}
			if b.ID == "" || b.Name == "" {
				return nil, fieldErrorf(field, "a tool_use block needs id and name")
			}
			if len(b.Input) == 0 || b.Input[0] != '{' {
				return nil, fieldErrorf(field+".input", "must be an object")
			}
			var c chatToolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = b.ID, "function", b.Name, b.Input
			main.ToolCalls = append(main.ToolCalls, c)
			uses[b.ID] = b.Name
		case "tool_result":
			name, ok := uses[b.ToolUseID]
			if !ok {
				return nil, fieldErrorf(field+".tool_use_id", "%q matches no tool_use block of an earlier assistant message", b.ToolUseID)
			}
			content, err := toolResultText(b.Content)
			if err != nil {
				return nil, fieldErrorf(field+".content", "%v", err)
			}
			if b.IsError {
				content = "Error: " + content
			}
			out = append(out, chatMessage{Role: "tool", Content: &content, ToolCallID: b.ToolUseID, Name: name})
		default:
			return nil, fieldErrorf(field+".type", "content block type %q is not supported (text, image, tool_use, tool_result, thinking)", b.Type)
		}
	}
	main.Reasoning = strings.Join(thinking, "\n")
	if images > 0 {
		main.Parts = parts
		out = append(out, main)
	} else if len(texts) > 0 || len(main.ToolCalls) > 0 || len(out) == 0 {
		text := strings.Join(texts, "\n")
		main.Content = &text
		out = append(out, main)
	}
	return out, nil
}

// toolResultText flattens a tool_result's content: a string, or a list
// of text blocks.
func toolResultText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	flat, err := flattenContent(raw, "content", nil)
	if err != nil {
		return "", err
	}
	_ = json.Unmarshal(flat, &s)
	return s, nil
}
