package api

import (
	"strings"
	"testing"
)

// toolPieces are a response that thinks, says a word and calls two tools.
var toolPieces = []Piece{
	{Kind: PieceReasoning, Text: "plan"},
	{Kind: PieceText, Text: "Ok."},
	{Kind: PieceToolCall, Index: 0, Name: "f"},
	{Kind: PieceToolCall, Index: 0, Text: `{"a":`},
	{Kind: PieceToolCall, Index: 0, Text: `1}`},
	{Kind: PieceToolCall, Index: 1, Name: "g"},
	{Kind: PieceToolCall, Index: 1, Text: `{}`},
}

func renderPieces(enc Encoder, e End) string {
	b := enc.Open(nil)
	for _, p := range toolPieces {
		b = enc.Delta(b, p)
	}
	return string(enc.Close(b, e))
}

func TestOpenAIEncoderTools(t *testing.T) {
	end := End{Finish: FinishStop, Usage: Usage{Prompt: 3, Completion: 9}}
	whole := renderPieces(&OpenAIEncoder{ID: "c", Model: "m", Created: 5, Chat: true}, end)
	want := `{"choices":[{"finish_reason":"tool_calls","index":0,"logprobs":null,"message":{"content":"Ok.","reasoning_content":"plan","role":"assistant",` +
		`"tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"f"},"id":"call_c_0","type":"function"},{"function":{"arguments":"{}","name":"g"},"id":"call_c_1","type":"function"}]}}],` +
		`"created":5,"id":"c","model":"m","object":"chat.completion","usage":{"completion_tokens":9,"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":12}}`
	if whole != want {
		t.Fatalf("whole\n got %s\nwant %s", whole, want)
	}
	var deltas []string
	for _, ev := range dataEvents(t, renderPieces(&OpenAIEncoder{ID: "c", Chat: true, Stream: true}, end)) {
		if m, ok := ev.(map[string]any); ok {
			ch := m["choices"].([]any)[0].(map[string]any)
			deltas = append(deltas, jsonOf(t, ch["delta"])+" "+jsonOf(t, ch["finish_reason"]))
		}
	}
	wantDeltas := []string{
		`{"content":"","role":"assistant"} null`,
		`{"reasoning_content":"plan"} null`,
		`{"content":"Ok."} null`,
		`{"tool_calls":[{"function":{"arguments":"","name":"f"},"id":"call_c_0","index":0,"type":"function"}]} null`,
		`{"tool_calls":[{"function":{"arguments":"{\"a\":"},"index":0}]} null`,
		`{"tool_calls":[{"function":{"arguments":"1}"},"index":0}]} null`,
		`{"tool_calls":[{"function":{"arguments":"","name":"g"},"id":"call_c_1","index":1,"type":"function"}]} null`,
		`{"tool_calls":[{"function":{"arguments":"{}"},"index":1}]} null`,
		`{} "tool_calls"`,
	}
	if strings.Join(deltas, "\n") != strings.Join(wantDeltas, "\n") {
		t.Fatalf("stream\n%s\nwant\n%s", strings.Join(deltas, "\n"), strings.Join(wantDeltas, "\n"))
	}
	// Cut by max_tokens, the reason stays length.
	if s := renderPieces(&OpenAIEncoder{Chat: true}, End{Finish: FinishLength}); !strings.Contains(s, `"finish_reason":"length"`) {
		t.Fatal(s)
	}
}

func TestAnthropicEncoderTools(t *testing.T) {
	whole := renderPieces(&AnthropicEncoder{ID: "m1", Model: "m"}, End{Finish: FinishStop})
	want := `"content":[{"signature":"","thinking":"plan","type":"thinking"},{"text":"Ok.","type":"text"},` +
		`{"id":"toolu_m1_0","input":{"a":1},"name":"f","type":"tool_use"},{"id":"toolu_m1_1","input":{},"name":"g","type":"tool_use"}]`
	if !strings.Contains(whole, want) || !strings.Contains(whole, `"stop_reason":"tool_use"`) {
		t.Fatalf("whole %s", whole)
	}
	stream := renderPieces(&AnthropicEncoder{ID: "m1", Stream: true}, End{Finish: FinishStop})
	var seq []string
	for _, ev := range strings.Split(strings.TrimSpace(stream), "\n\n") {
		name, data, _ := strings.Cut(ev, "\ndata: ")
		name = strings.TrimPrefix(name, "event: ")
		switch name {
		case "content_block_start", "content_block_delta", "content_block_stop":
			seq = append(seq, name+" "+data)
		}
	}
	wantSeq := []string{
		`content_block_start {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"thinking":"plan","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
		`content_block_stop {"index":0,"type":"content_block_stop"}`,
		`content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"text":"Ok.","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
		`content_block_stop {"index":1,"type":"content_block_stop"}`,
		`content_block_start {"content_block":{"id":"toolu_m1_0","input":{},"name":"f","type":"tool_use"},"index":2,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"partial_json":"{\"a\":","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
		`content_block_delta {"delta":{"partial_json":"1}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
		`content_block_stop {"index":2,"type":"content_block_stop"}`,
		`content_block_start {"content_block":{"id":"toolu_m1_1","input":{},"name":"g","type":"tool_use"},"index":3,"type":"content_block_start"}`,
		`content_block_delta {"delta":{"partial_json":"{}","type":"input_json_delta"},"index":3,"type":"content_block_delta"}`,
		`content_block_stop {"index":3,"type":"content_block_stop"}`,
	}
	if strings.Join(seq, "\n") != strings.Join(wantSeq, "\n") || !strings.Contains(stream, `"stop_reason":"tool_use"`) {
		t.Fatalf("stream\n%s", strings.Join(seq, "\n"))
	}
	if s := renderPieces(&AnthropicEncoder{}, End{Finish: FinishStop, StopSequence: "##"}); !strings.Contains(s, `"stop_reason":"stop_sequence","stop_sequence":"##"`) {
		t.Fatal(s)
	}
}
