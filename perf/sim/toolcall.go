package sim

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ToolCalls makes a simulated engine answer like a Qwen/Hermes model
// that was offered tools, so agents' tool loops can run against it. The
// engine still sees token ids only; the rule is deterministic and reads
// the prompt as the chat template rendered it (ChatML with Qwen's tool
// section), with the tokenizer the router uses:
//
//   - a prompt without the <tool_call> token offers no tools: generation
//     is the ordinary pseudo-random one;
//   - a prompt whose last user turn is a <tool_response> gets an answer
//     quoting it: "The tool answered: ..." then end of sequence;
//   - any other prompt with tools gets one call of the first tool, its
//     arguments filled from the parameters' schema (string "sim",
//     number 1, boolean true, the first of an enum), written as Qwen does:
//     <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, then
//     end of sequence; when the prompt leaves thinking on (it does not end
//     in an empty <think></think>) a short <think> block comes first.
//
// max_tokens cuts a scripted answer as it cuts any other; with ignore_eos
// the pseudo-random tokens follow it.
type ToolCalls struct {
	encode func(string) []uint32
	decode func([]uint32) string
	marker uint32
}

// NewToolCalls reads prompts with a tokenizer's encode and decode; the
// tokenizer must have <tool_call> as one token (Qwen2.5, Qwen3), else
// NewToolCalls returns nil.
func NewToolCalls(encode func(string) []uint32, decode func([]uint32) string) *ToolCalls {
	ids := encode("<tool_call>")
	if len(ids) != 1 {
		return nil
	}
	return &ToolCalls{encode: encode, decode: decode, marker: ids[0]}
}

// script is the answer to prompt, nil when the prompt offers no tools.
func (t *ToolCalls) script(prompt []uint32) []uint32 {
	if t == nil || !containsID(prompt, t.marker) {
		return nil
	}
	text := t.decode(prompt)
	start := strings.Index(text, "<tools>\n") // not the "<tools></tools>" of the instructions
	if start < 0 {
		return nil
	}
	tools, _, ok := strings.Cut(text[start+len("<tools>"):], "</tools>")
	if !ok {
		return nil
	}
	turn := text
	if i := strings.LastIndex(text, "<|im_start|>user\n"); i >= 0 {
		turn = text[i+len("<|im_start|>user\n"):]
	}
	if strings.HasPrefix(turn, "<tool_response>") {
		result := turn[len("<tool_response>"):]
		if j := strings.Index(result, "</tool_response>"); j >= 0 {
			result = result[:j]
		}
		return t.encode("The tool answered: " + strings.TrimSpace(result))
	}
	name, args := firstTool(tools)
	if name == "" {
		return nil
	}
	call, _ := json.Marshal(name)
	out := "<tool_call>\n{\"name\": " + string(call) + ", \"arguments\": " + args + "}\n</tool_call>"
	if !strings.HasSuffix(strings.TrimRight(text, "\n"), "</think>") {
		out = "<think>\nThe user offered tools; calling " + name + ".\n</think>\n\n" + out
	}
	return t.encode(out)
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// firstTool reads the first tool line of Qwen's <tools> section: its
// name, and arguments made from its parameters.
func firstTool(section string) (string, string) {
	for _, line := range strings.Split(section, "\n") {
		var tool struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &tool) != nil || tool.Function.Name == "" {
			continue
		}
		return tool.Function.Name, argumentsFor(tool.Function.Parameters)
	}
	return "", ""
}

// argumentsFor builds an object with a value for each property of an
// object schema, in the schema's order, written as Python's json.dumps.
func argumentsFor(schema json.RawMessage) string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "{}"
	}
	d := json.NewDecoder(bytes.NewReader(s.Properties))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return "{}"
	}
	var parts []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return "{}"
		}
		var prop struct {
			Type string            `json:"type"`
			Enum []json.RawMessage `json:"enum"`
		}
		if d.Decode(&prop) != nil {
			return "{}"
		}
		key, _ := json.Marshal(k)
		parts = append(parts, string(key)+": "+valueFor(prop.Type, prop.Enum))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func valueFor(typ string, enum []json.RawMessage) string {
	if len(enum) > 0 {
		return string(enum[0])
	}
	switch typ {
	case "integer", "number":
		return "1"
	case "boolean":
		return "true"
	case "array":
		return "[]"
	case "object":
		return "{}"
	}
	return `"sim"`
}

// nextOf is the k-th token of r: its script's, then (with ignore_eos)
// the pseudo-random ones, or the ordinary generation without a script.
func (c *Core) nextOf(r *Request) (uint32, bool) {
	if !r.scripted {
		r.script, r.scripted = c.cfg.Tools.script(r.tokens[:r.promptLen]), true
	}
	if r.script == nil {
		return nextToken(r.seed, r.generated, r.Params.IgnoreEOS || c.cfg.NoRandomEOS, c.cfg.EOS)
	}
	if r.generated < len(r.script) {
		return r.script[r.generated], false
	}
	if !r.Params.IgnoreEOS {
		return c.cfg.EOS, true
	}
	return nextToken(r.seed, r.generated, true, c.cfg.EOS)
}
