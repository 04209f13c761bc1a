package sim

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

func TestToolCallsScript(t *testing.T) {
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	tc := NewToolCalls(func(s string) []uint32 { return tok.Encode(nil, s, false) },
		func(ids []uint32) string { return tok.DecodeString(ids, false) })
	if tc == nil {
		t.Fatal("Qwen3's <tool_call> is not one token")
	}
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["c","f"]}}}}}]`
	user := `{"role":"user","content":"Weather in Paris?"}`
	call := `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]}`
	cases := []struct {
		name, messages, tools string
		think                 bool
		want                  string // "" for no script
	}{
		{"no tools", "[" + user + "]", "", true, ""},
		{"tools, thinking off", "[" + user + "]", tools, false,
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"sim\", \"days\": 1, \"unit\": \"c\"}}\n</tool_call>"},
		{"tools, thinking on", "[" + user + "]", tools, true,
			"<think>\nThe user offered tools; calling get_weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"sim\", \"days\": 1, \"unit\": \"c\"}}\n</tool_call>"},
		{"tool response", "[" + user + "," + call + `,{"role":"tool","tool_call_id":"c1","content":"sunny, 21 C"}]`, tools, false,
			"The tool answered: sunny, 21 C"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := &tokenize.ChatInput{Messages: json.RawMessage(c.messages), AddGenerationPrompt: true,
				Extra: map[string]json.RawMessage{"enable_thinking": json.RawMessage(map[bool]string{true: "true", false: "false"}[c.think])}}
			if c.tools != "" {
				in.Tools = json.RawMessage(c.tools)
			}
			prompt, _, err := tok.EncodeChat(nil, in)
			if err != nil {
				t.Fatal(err)
			}
			got := tc.script(prompt)
			if c.want == "" {
				if got != nil {
					t.Fatalf("scripted %q without tools", tok.DecodeString(got, false))
				}
				return
			}
			if s := tok.DecodeString(got, false); s != c.want {
				t.Fatalf("script %q, want %q", s, c.want)
			}
		})
	}
}

// TestToolCallsEngine: a core with Tools runs the scripted answer and
// ends it with EOS (a stop); max_tokens cuts it.
func TestToolCallsEngine(t *testing.T) {
	script := []uint32{7, 8, 9}
	for _, tc := range []struct {
		max    int
		want   []uint32
		finish wire.FinishReason
	}{{10, []uint32{7, 8, 9, DefaultEOS}, wire.FinishStop}, {2, []uint32{7, 8}, wire.FinishLength}} {
		cfg := DefaultConfig().Rank
		cfg.Tools = &ToolCalls{encode: func(string) []uint32 { return script },
			decode: func([]uint32) string {
				return "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>"
			}, marker: 5}
		c := newCore(t, cfg)
		k := RequestKey{Stream: 1}
		must(t, c.Add(NewRequest(k, []uint32{1, 5, 2}, Params{MaxTokens: tc.max}, kvstore.Keys{})))
		toks, last := drain(t, c, k)
		if fmt.Sprint(toks) != fmt.Sprint(tc.want) || last.Finish != tc.finish {
			t.Fatalf("max %d: tokens %v %s, want %v %s", tc.max, toks, last.Finish, tc.want, tc.finish)
		}
	}
}
