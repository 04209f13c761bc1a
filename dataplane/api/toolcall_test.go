package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// parse feeds chunks through a parser of syn (and reasoning when think)
// and collects what comes out.
func parse(syn *ToolSyntax, think bool, chunks ...string) Collect {
	o := &OutputParser{Tools: NewToolParser(syn)}
	if think {
		o.Reasoning = NewReasoningParser("")
	}
	var c Collect
	for i, ch := range chunks {
		for _, p := range o.Feed(nil, ch, i == len(chunks)-1) {
			c.Add(p)
		}
	}
	return c
}

// Real outputs of each family, as the models write them.
var toolCases = []struct {
	name   string
	syn    *ToolSyntax
	think  bool
	out    string
	text   string
	reason string
	calls  []ToolCall
}{
	{"qwen3 one call", Hermes, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
		"", "", []ToolCall{{"get_weather", `{"location": "Paris", "unit": "celsius"}`}}},
	{"qwen3 thinking then two calls", Hermes, true, "<think>\nThe user wants weather in two cities.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich \\\"CH\\\"\"}}\n</tool_call>",
		"", "\nThe user wants weather in two cities.\n", []ToolCall{{"get_weather", `{"city": "Paris"}`}, {"get_weather", `{"city": "Zürich \"CH\""}`}}},
	{"qwen2.5 text before the call", Hermes, false, "Let me check.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"a<b}\", \"n\": [1, 2.5e3, true, null]}}\n</tool_call>",
		"Let me check.\n", "", []ToolCall{{"search", `{"q": "a<b}", "n": [1, 2.5e3, true, null]}`}}},
	{"hermes 2 pro arguments first", Hermes, false, "<tool_call>\n{\"arguments\": {\"symbol\": \"TSLA\"}, \"name\": \"get_stock_fundamentals\"}\n</tool_call>",
		"", "", []ToolCall{{"get_stock_fundamentals", `{"symbol": "TSLA"}`}}},
	{"hermes unclosed at the end", Hermes, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}",
		"", "", []ToolCall{{"f", `{}`}}},
	{"hermes no call", Hermes, false, "Paris is sunny <tool or not>.", "Paris is sunny <tool or not>.", "", nil},
	{"hermes python call is text", Hermes, false, "<tool_call>\nget_weather(city='Paris')\n</tool_call>", "<tool_call>\nget_weather(city='Paris')\n</tool_call>", "", nil},
	{"hermes single quotes are text", Hermes, false, "<tool_call>{'name': 'f', 'arguments': {}}</tool_call>", "<tool_call>{'name': 'f', 'arguments': {}}</tool_call>", "", nil},
	{"hermes truncated is text", Hermes, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"unfini", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"unfini", "", nil},
	{"hermes garbage after the object is text", Hermes, false, "<tool_call>{\"name\": \"f\", \"arguments\": {}} oops</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": {}} oops</tool_call>", "", nil},
	{"hermes arguments not an object", Hermes, false, "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>", "", nil},
	{"llama 3.1 parameters", Llama3JSON, false, "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, CA\", \"unit\": \"Fahrenheit\"}}",
		"", "", []ToolCall{{"get_current_conditions", `{"location": "San Francisco, CA", "unit": "Fahrenheit"}`}}},
	{"llama python_tag and two calls", Llama3JSON, false, "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"arguments\": {}}",
		"", "", []ToolCall{{"a", `{"x": 1}`}, {"b", `{}`}}},
	{"llama text", Llama3JSON, false, "The answer is {42}.", "The answer is {42}.", "", nil},
	{"llama bad json is text", Llama3JSON, false, "{\"name\": \"a\", \"parameters\": {\"x\": 1,}}", "{\"name\": \"a\", \"parameters\": {\"x\": 1,}}", "", nil},
	{"deepseek v3 two calls", DeepSeekV3, false, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_weather\n```json\n{\"location\": \"Beijing\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_weather\n```json\n{\"location\": \"Tokyo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"", "", []ToolCall{{"get_current_weather", `{"location": "Beijing"}`}, {"get_current_weather", `{"location": "Tokyo"}`}}},
	{"deepseek r1 reasoning and a call", DeepSeekV3, true, "<think>plan</think>Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"Sure.", "plan", []ToolCall{{"f", `{}`}}},
	{"deepseek no fence is text", DeepSeekV3, false, "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{}<｜tool▁call▁end｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n{}<｜tool▁call▁end｜>", "", nil},
}

func TestToolParsers(t *testing.T) {
	for _, tc := range toolCases {
		t.Run(tc.name, func(t *testing.T) {
			got := parse(tc.syn, tc.think, tc.out)
			if string(got.Text) != tc.text || string(got.Reasoning) != tc.reason || !reflect.DeepEqual(got.Calls, tc.calls) {
				t.Fatalf("got text %q reasoning %q calls %+v\nwant text %q reasoning %q calls %+v", got.Text, got.Reasoning, got.Calls, tc.text, tc.reason, tc.calls)
			}
			for _, c := range got.Calls {
				if !json.Valid([]byte(c.Arguments)) {
					t.Fatalf("arguments %q are not JSON", c.Arguments)
				}
			}
		})
	}
}

// TestToolParsersSplit cuts every output at every byte position (and
// feeds it a byte at a time): a valid call streams to the same calls and
// text; nothing is lost or duplicated in any case.
func TestToolParsersSplit(t *testing.T) {
	for _, tc := range toolCases {
		t.Run(tc.name, func(t *testing.T) {
			whole := parse(tc.syn, tc.think, tc.out)
			for i := 0; i <= len(tc.out); i++ {
				got := parse(tc.syn, tc.think, tc.out[:i], tc.out[i:])
				checkSplit(t, tc.out, i, whole, got, tc.calls != nil)
			}
			bytes := make([]string, len(tc.out))
			for i := 0; i < len(tc.out); i++ {
				bytes[i] = tc.out[i : i+1]
			}
			checkSplit(t, tc.out, -1, whole, parse(tc.syn, tc.think, bytes...), tc.calls != nil)
		})
	}
}

func checkSplit(t *testing.T, out string, at int, whole, got Collect, valid bool) {
	t.Helper()
	if valid {
		if !reflect.DeepEqual(whole, got) {
			t.Fatalf("cut at %d: %+v, whole %+v", at, got, whole)
		}
		return
	}
	// A malformed call streamed in pieces may have had its name sent
	// before it went wrong: what the model wrote still all arrives.
	n := len(got.Text) + len(got.Reasoning)
	for _, c := range got.Calls {
		n += len(c.Arguments)
	}
	if n == 0 || !strings.Contains(out, string(got.Text)) && len(got.Calls) == 0 {
		t.Fatalf("cut at %d: %+v lost the output %q", at, got, out)
	}
}

func TestToolSyntaxOf(t *testing.T) {
	for tmpl, want := range map[string]*ToolSyntax{
		`{{- '<tool_call>\n{"name": "' }}`:                   Hermes,
		`{{'<｜tool▁call▁begin｜>' + tool['type']}}`:           DeepSeekV3,
		`{{- "Environment: ipython\n" }}`:                    Llama3JSON,
		`{% for m in messages %}{{ m.content }}{% endfor %}`: nil,
	} {
		if got := ToolSyntaxOf(tmpl); got != want {
			t.Errorf("%q: %v, want %v", tmpl, got, want)
		}
	}
	for _, name := range []string{"hermes", "llama3_json", "deepseek_v3", "deepseekv3", "none"} {
		if _, err := ToolSyntaxNamed(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := ToolSyntaxNamed("pythonic"); err == nil {
		t.Error("an unknown parser was accepted")
	}
}

// BenchmarkToolParserLargeCall streams a call with 64 KB of arguments
// (an agent writing a file) a few bytes at a time, as tokens arrive: the
// work is linear in the call's size.
func BenchmarkToolParserLargeCall(b *testing.B) {
	out := "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.go\", \"content\": \"" +
		strings.Repeat("x := 1\\n", 8192) + "\"}}\n</tool_call>"
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	var dst []Piece
	for b.Loop() {
		p := NewToolParser(Hermes)
		for i := 0; i < len(out); i += 4 {
			dst = p.Feed(dst[:0], out[i:min(i+4, len(out))], i+4 >= len(out))
		}
		if p.Calls() != 1 {
			b.Fatal("no call")
		}
	}
}

// TestToolParserTextAllocs: plain text through a parser (a chat that
// offers tools and gets an answer) costs no allocation per token.
func TestToolParserTextAllocs(t *testing.T) {
	p := NewToolParser(Hermes)
	dst := make([]Piece, 0, 4)
	if n := testing.AllocsPerRun(1000, func() { dst = p.Feed(dst[:0], " word", false) }); n != 0 {
		t.Fatalf("%v allocations a token", n)
	}
}
