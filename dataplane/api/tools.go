package api

import (
	"encoding/json"
	"fmt"
)

// openAITool is one entry of OpenAI's tools, as the chat template gets it.
type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// checkOpenAITools checks OpenAI's tools and returns their names.
func checkOpenAITools(raw json.RawMessage) (map[string]bool, *Error) {
	if e := checkArrayOfObjects("tools", raw); e != nil || len(raw) == 0 || string(raw) == "null" {
		return nil, e
	}
	var tools []openAITool
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, BadRequest("tools", "tools: each must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}")
	}
	names := map[string]bool{}
	for i, t := range tools {
		f := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, BadRequest(f+".type", f+".type must be \"function\"")
		}
		if t.Function.Name == "" {
			return nil, BadRequest(f+".function.name", f+".function.name is required")
		}
		if len(t.Function.Parameters) > 0 && string(t.Function.Parameters) != "null" {
			if err := checkParameters(f+".function.parameters", t.Function.Parameters); err != nil {
				return nil, badRequestOf("tools", err)
			}
		}
		names[t.Function.Name] = true
	}
	return names, nil
}

// anthropicTools turns Anthropic's tools ({name, description,
// input_schema}) into the OpenAI shape chat templates render, as vLLM
// gives them (HF transformers' apply_chat_template takes the same).
func anthropicTools(raw json.RawMessage) (json.RawMessage, map[string]bool, *Error) {
	if e := checkArrayOfObjects("tools", raw); e != nil || len(raw) == 0 || string(raw) == "null" {
		return nil, nil, e
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, nil, BadRequest("tools", "tools: each must be {\"name\", \"description\", \"input_schema\"}")
	}
	out := make([]openAITool, len(tools))
	names := map[string]bool{}
	for i, t := range tools {
		f := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, BadRequest(f+".type", fmt.Sprintf("%s.type: server tool %q is not supported (custom tools only)", f, t.Type))
		}
		if t.Name == "" {
			return nil, nil, BadRequest(f+".name", f+".name: Field required")
		}
		if len(t.InputSchema) == 0 {
			return nil, nil, BadRequest(f+".input_schema", f+".input_schema: Field required")
		}
		if err := checkParameters(f+".input_schema", t.InputSchema); err != nil {
			return nil, nil, badRequestOf("tools", err)
		}
		if string(jsonField(t.InputSchema, "type")) != `"object"` {
			return nil, nil, BadRequest(f+".input_schema.type", f+".input_schema.type: Input should be 'object'")
		}
		out[i].Type = "function"
		out[i].Function.Name, out[i].Function.Description, out[i].Function.Parameters = t.Name, t.Description, t.InputSchema
		names[t.Name] = true
	}
	b, _ := json.Marshal(out)
	return b, names, nil
}

func jsonField(raw json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m[key]
}

// anthropicToolChoice maps Anthropic's tool_choice onto OpenAI's: auto,
// any (required), tool (a named function), none.
func anthropicToolChoice(raw json.RawMessage) (json.RawMessage, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, BadRequest("tool_choice", "tool_choice: must be an object with a type")
	}
	switch c.Type {
	case "auto":
		return json.RawMessage(`"auto"`), nil
	case "any":
		return json.RawMessage(`"required"`), nil
	case "none":
		return json.RawMessage(`"none"`), nil
	case "tool":
		if c.Name == "" {
			return nil, BadRequest("tool_choice.name", "tool_choice.name: Field required")
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
		return b, nil
	}
	return nil, BadRequest("tool_choice.type", fmt.Sprintf("tool_choice.type %q is not auto, any, tool or none", c.Type))
}

// checkToolChoice refuses a tool_choice that forces a call without tools
// or names a function the tools do not have; none sets NoToolCalls.
func checkToolChoice(r *Request, raw json.RawMessage, names map[string]bool) *Error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		r.NoToolCalls = s == "none"
		if s == "required" && len(names) == 0 {
			return BadRequest("tool_choice", "tool_choice \"required\" needs tools")
		}
		return nil
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Function.Name == "" {
		return BadRequest("tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\"}}")
	}
	if !names[named.Function.Name] {
		return BadRequest("tool_choice", fmt.Sprintf("tool_choice names %q, which is not among the tools", named.Function.Name))
	}
	return nil
}
