package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kvgate/kvgate/dataplane/media"
)

// defaultResponseTokens is max_output_tokens when a client gives none.
const defaultResponseTokens = 4096

// DecodeResponses decodes an OpenAI POST /v1/responses body: instructions
// and input (a string, or items: messages, function_call and
// function_call_output) become the chat the template renders, function
// tools its tools. Nothing is stored, so previous_response_id is refused.
func DecodeResponses(body []byte, check ModelCheck) (*Request, *Error) {
	var b struct {
		Model              string                     `json:"model"`
		Instructions       *string                    `json:"instructions"`
		Input              json.RawMessage            `json:"input"`
		MaxOutputTokens    *int64                     `json:"max_output_tokens"`
		Temperature        *float64                   `json:"temperature"`
		TopP               *float64                   `json:"top_p"`
		Stream             bool                       `json:"stream"`
		User               string                     `json:"user"`
		Tools              json.RawMessage            `json:"tools"`
		ToolChoice         json.RawMessage            `json:"tool_choice"`
		PreviousResponseID *string                    `json:"previous_response_id"`
		Background         bool                       `json:"background"`
		ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
		Include            []string                   `json:"include"`
		foreignFields
		Text *struct {
			Format json.RawMessage `json:"format"`
		} `json:"text"`
		Reasoning *struct {
			Effort *string `json:"effort"`
		} `json:"reasoning"`
	}
	if e := decodeJSON(body, &b); e != nil {
		return nil, e
	}
	if e := b.foreignFields.refuse("the Responses API here"); e != nil {
		return nil, e
	}
	if slices.Contains(b.Include, "message.output_text.logprobs") {
		return nil, BadRequest("include", "include message.output_text.logprobs is not supported on /v1/responses (Chat and Completions return logprobs)")
	}
	f := sampling{Model: b.Model, MaxTokens: b.MaxOutputTokens, Temperature: b.Temperature, TopP: b.TopP, Stream: b.Stream, User: b.User}
	r, e := f.request(Responses, defaultResponseTokens, check)
	if e != nil {
		return nil, e
	}
	if b.Background {
		return nil, BadRequest("background", "background responses are not supported: nothing is stored to poll")
	}
	if b.PreviousResponseID != nil {
		return nil, BadRequest("previous_response_id", "previous_response_id is not supported: responses are not stored; send the whole input")
	}
	tools, names, e := responseTools(b.Tools)
	if e != nil {
		return nil, e
	}
	choice, e := responseToolChoice(b.ToolChoice)
	if e != nil {
		return nil, e
	}
	if e = checkToolChoice(r, choice, names); e != nil {
		return nil, e
	}
	format, e := responseFormat(b.Text)
	if e != nil {
		return nil, e
	}
	if r.Guided, e = guidedOf(format, choice); e != nil {
		return nil, e
	}
	sink := &imageSink{}
	msgs, err := responseInput(b.Instructions, b.Input, sink)
	if err != nil {
		return nil, badRequestOf("input", err)
	}
	sink.placed = true
	kwargs := b.ChatTemplateKwargs
	if b.Reasoning != nil && b.Reasoning.Effort != nil && kwargs["enable_thinking"] == nil {
		kwargs = map[string]json.RawMessage{"enable_thinking": mustJSON(*b.Reasoning.Effort != "none" && *b.Reasoning.Effort != "minimal")}
		for k, v := range b.ChatTemplateKwargs {
			kwargs[k] = v
		}
	}
	norm, err := normalizeMessages(msgs, sink)
	if err != nil {
		return nil, badRequestOf("input", badRequestOf("messages", err))
	}
	r.Conversation = conversationOf(norm, tools, kwargs, nil, sink)
	return r, nil
}

// responseFormat maps text.format onto Chat's response_format: json_schema
// carries its name, schema and strict inside json_schema there.
func responseFormat(text *struct {
	Format json.RawMessage `json:"format"`
}) (json.RawMessage, *Error) {
	if text == nil || len(text.Format) == 0 || string(text.Format) == "null" {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(text.Format, &f); err != nil {
		return nil, BadRequest("text.format", "text.format must be an object with a type")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if err := checkSchema("text.format.schema", f.Schema, 0); err != nil {
			return nil, badRequestOf("text.format.schema", err)
		}
		return mustJSON(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}}), nil
	}
	return nil, BadRequest("text.format.type", fmt.Sprintf("text.format.type %q is not text, json_object or json_schema", f.Type))
}

// responseTools turns the Responses API's function tools ({type, name,
// description, parameters}) into the chat shape.
func responseTools(raw json.RawMessage) (json.RawMessage, map[string]bool, *Error) {
	if e := checkArrayOfObjects("tools", raw); e != nil || len(raw) == 0 || string(raw) == "null" {
		return nil, nil, e
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, nil, BadRequest("tools", "tools: each must be {\"type\": \"function\", \"name\", \"parameters\"}")
	}
	out := make([]openAITool, len(tools))
	for i, t := range tools {
		out[i].Type = t.Type
		out[i].Function.Name, out[i].Function.Description, out[i].Function.Parameters = t.Name, t.Description, t.Parameters
		if t.Type != "function" {
			return nil, nil, BadRequest(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("tools[%d].type %q is not supported (function tools only)", i, t.Type))
		}
	}
	b, _ := json.Marshal(out)
	names, e := checkOpenAITools(b)
	if e != nil {
		e.Param = responseField(e.Param)
		return nil, nil, e
	}
	return b, names, nil
}

// responseField names a chat tools field as the Responses API spells it.
func responseField(f string) string {
	return strings.Replace(f, ".function.", ".", 1)
}

// responseToolChoice maps {"type": "function", "name"} onto the chat shape.
func responseToolChoice(raw json.RawMessage) (json.RawMessage, *Error) {
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Type != "function" || c.Name == "" {
		return nil, BadRequest("tool_choice", `tool_choice must be auto, none, required or {"type": "function", "name"}`)
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	return b, nil
}

// responseInput turns instructions and input into chat messages: a
// string is one user message; items are messages, function calls (an
// assistant message's tool_calls, consecutive calls in one) and their
// outputs (tool messages); reasoning items are dropped, as the chat
// templates drop past reasoning. Messages' input_image parts are read
// into sink.
func responseInput(instructions *string, raw json.RawMessage, sink *imageSink) (json.RawMessage, error) {
	var msgs []chatMessage
	if instructions != nil {
		msgs = append(msgs, chatMessage{Role: "system", Content: instructions})
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		msgs = append(msgs, chatMessage{Role: "user", Content: &s})
		return json.Marshal(msgs)
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return nil, fmt.Errorf("input must be a string or a non-empty list of items")
	}
	calls := map[string]bool{}
	for i, it := range items {
		field := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			before := len(sink.images)
			text, parts, err := responseContent(it.Content, field+".content", sink)
			if _, named := err.(*fieldError); named {
				return nil, err
			} else if err != nil {
				return nil, fieldErrorf(field+".content", "%v", err)
			}
			if len(sink.images) > before && it.Role != "user" {
				return nil, fieldErrorf(sink.images[before].Field, "images belong to user messages, not %s", it.Role)
			}
			msgs = append(msgs, chatMessage{Role: it.Role, Content: &text, Parts: parts})
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, fieldErrorf(field, "a function_call needs call_id and name")
			}
			var c chatToolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = it.CallID, "function", it.Name, mustJSON(it.Arguments)
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) > 0 {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, c)
			} else {
				empty := ""
				msgs = append(msgs, chatMessage{Role: "assistant", Content: &empty, ToolCalls: []chatToolCall{c}})
			}
			calls[it.CallID] = true
		case "function_call_output":
			if !calls[it.CallID] {
				return nil, fieldErrorf(field+".call_id", "%q matches no function_call before it", it.CallID)
			}
			out, err := responseText(it.Output)
			if err != nil {
				return nil, fieldErrorf(field+".output", "%v", err)
			}
			msgs = append(msgs, chatMessage{Role: "tool", Content: &out, ToolCallID: it.CallID})
		case "reasoning":
		default:
			return nil, fieldErrorf(field+".type", "item type %q is not supported (message, function_call, function_call_output, reasoning)", it.Type)
		}
	}
	return json.Marshal(msgs)
}

// responseText flattens content: a string, or input_text / output_text parts.
func responseText(raw json.RawMessage) (string, error) {
	text, _, err := responseContent(raw, "", nil)
	return text, err
}

// responseContent reads a message's content: a string, or input_text /
// output_text parts, and with sink input_image parts too, each named
// field[j]; parts is the content as a list when it holds images.
func responseContent(raw json.RawMessage, field string, sink *imageSink) (text string, parts []contentPart, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var items []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
		FileID   *string         `json:"file_id"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", nil, fmt.Errorf("must be a string or a list of text parts")
	}
	var texts []string
	images := 0
	for j, p := range items {
		switch {
		case p.Type == "input_text" || p.Type == "output_text" || p.Type == "text":
			texts = append(texts, p.Text)
			parts = append(parts, textPart(p.Text))
			continue
		case p.Type == "input_image" && sink != nil:
			part := fmt.Sprintf("%s[%d]", field, j)
			if p.FileID != nil {
				return "", nil, fieldErrorf(part+".file_id", "file_id images are not supported: nothing is stored; send image_url")
			}
			src, err := media.ParseResponsesImage(p.ImageURL)
			if err := sink.addImage(part, src, err); err != nil {
				return "", nil, err
			}
		default:
			return "", nil, fmt.Errorf("part type %q is not supported (input_text, output_text, input_image)", p.Type)
		}
		parts = append(parts, contentPart{Type: "image"})
		images++
	}
	if images == 0 {
		parts = nil
	}
	return strings.Join(texts, "\n"), parts, nil
}
