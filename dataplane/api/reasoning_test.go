package api

import (
	"reflect"
	"testing"
)

func TestReasoningParser(t *testing.T) {
	cases := []struct {
		name, prompt, out, reason, text string
	}{
		{"qwen3 thinks", "<|im_start|>assistant\n", "<think>\nShort plan.\n</think>\n\nParis is sunny.", "\nShort plan.\n", "Paris is sunny."},
		{"qwen3 thinking off", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "<think>is text</think>", "", "<think>is text</think>"},
		{"deepseek r1 starts inside", "<｜Assistant｜><think>\n", "plan</think>answer", "plan", "answer"},
		{"no think tag", "<|im_start|>assistant\n", "Just text </think> here", "", "Just text </think> here"},
		{"think later is text", "", "Hi <think>x</think>", "", "Hi <think>x</think>"},
		{"cut inside reasoning", "", "<think>still going", "still going", ""},
		{"empty", "", "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for at := 0; at <= len(c.out); at++ {
				p := NewReasoningParser(c.prompt)
				var got Collect
				for _, piece := range p.Feed(p.Feed(nil, c.out[:at], false), c.out[at:], true) {
					got.Add(piece)
				}
				want := Collect{Text: []byte(c.text), Reasoning: []byte(c.reason)}
				if string(got.Text) != c.text || string(got.Reasoning) != c.reason {
					t.Fatalf("cut at %d: %+v, want %+v", at, got, want)
				}
			}
		})
	}
}

// TestOutputParserOrder: reasoning, then text, then calls, each piece
// once, in the order the model wrote them.
func TestOutputParserOrder(t *testing.T) {
	o := &OutputParser{Reasoning: NewReasoningParser(""), Tools: NewToolParser(Hermes)}
	out := "<think>r</think>\n\nLet me look.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	var got []Piece
	for i := 0; i < len(out); i++ {
		got = o.Feed(got, out[i:i+1], i == len(out)-1)
	}
	var kinds []PieceKind
	for _, p := range got {
		if len(kinds) == 0 || kinds[len(kinds)-1] != p.Kind {
			kinds = append(kinds, p.Kind)
		}
	}
	if !reflect.DeepEqual(kinds, []PieceKind{PieceReasoning, PieceText, PieceToolCall}) || o.ToolCalls() != 1 {
		t.Fatalf("pieces %+v", got)
	}
}
