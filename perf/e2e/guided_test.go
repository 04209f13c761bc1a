//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestStructuredOutputNeedsAGuidedEngine: response_format and forced tool
// calls go only to engines that announce structured-output support; the
// simulator does not, so they get a 400 naming the field, while text
// formats and tool_choice auto pass.
func TestStructuredOutputNeedsAGuidedEngine(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero")
	msgs := []any{map[string]any{"role": "user", "content": "give me JSON"}}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}
	cases := []struct {
		extra  map[string]any
		status int
		param  string
	}{
		{map[string]any{"response_format": map[string]any{"type": "json_object"}}, 400, "response_format"},
		{map[string]any{"response_format": map[string]any{"type": "text"}}, 200, ""},
		{map[string]any{"tools": tools, "tool_choice": "auto"}, 200, ""},
		{map[string]any{"tools": tools, "tool_choice": "required"}, 400, "response_format"},
		{map[string]any{"response_format": map[string]any{"type": "yaml"}}, 400, "response_format"},
	}
	for i, c := range cases {
		body := map[string]any{"model": model, "messages": msgs, "max_tokens": 2}
		for k, v := range c.extra {
			body[k] = v
		}
		r, out := post(t, base+"/v1/chat/completions", body)
		if r.StatusCode != c.status || (c.param != "" && !strings.Contains(string(out), `"param":"`+c.param+`"`)) {
			t.Fatalf("case %d: %d %s", i, r.StatusCode, out)
		}
	}
}
