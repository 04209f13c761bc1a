package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// refResponsesBody is how Close built a whole Responses answer before it
// was written by hand: each item a map (completed when the next began),
// given with the rest of response's map to json.Marshal. It stays here
// as the reference.
func refResponsesBody(o *ResponsesEncoder, pieces []Piece, e End) []byte {
	var items []map[string]any
	var kind PieceKind
	var text []byte
	var name string
	calls := 0
	done := func() {
		if items == nil {
			return
		}
		n := strconv.Itoa(len(items) - 1)
		switch kind {
		case PieceReasoning:
			items[len(items)-1] = map[string]any{"type": "reasoning", "id": "rs_" + o.ID + "_" + n, "summary": []any{},
				"content": []any{map[string]any{"type": "reasoning_text", "text": string(text)}}}
		case PieceToolCall:
			items[len(items)-1] = map[string]any{"type": "function_call", "id": "fc_" + o.ID + "_" + n,
				"call_id": "call_" + o.ID + "_" + strconv.Itoa(calls-1), "name": name, "arguments": string(text), "status": "completed"}
		default:
			items[len(items)-1] = map[string]any{"type": "message", "id": "msg_" + o.ID + "_" + n, "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": string(text), "annotations": []any{}}}}
		}
	}
	if len(pieces) == 0 {
		pieces = []Piece{{Kind: PieceText}}
	}
	for i, p := range pieces {
		if i == 0 || p.Kind != kind || p.Name != "" {
			done()
			kind, text, name = p.Kind, nil, p.Name
			items = append(items, nil)
			if p.Kind == PieceToolCall {
				calls++
			}
		}
		text = append(text, p.Text...)
	}
	done()
	ref := *o
	ref.items = items
	b, err := json.Marshal(ref.response("completed", &e))
	if err != nil {
		panic(err)
	}
	return b
}

// responsesCase is a whole Responses answer: its encoder, pieces and end.
type responsesCase struct {
	name   string
	enc    ResponsesEncoder
	pieces []Piece
	end    End
}

func (c *responsesCase) feed() *ResponsesEncoder {
	o := c.enc
	for _, p := range c.pieces {
		o.Delta(nil, p)
	}
	return &o
}

func responsesCases() []responsesCase {
	usage := Usage{Prompt: 12, Completion: 2, Cached: 8}
	text := []Piece{{Text: "Hé"}, {Text: "\n"}}
	think := []Piece{{Kind: PieceReasoning, Text: "let me <think>"}, {Kind: PieceReasoning, Text: "\u2028"}}
	calls := []Piece{{Kind: PieceToolCall, Name: "get_weather", Index: 4, Text: `{"city":`}, {Kind: PieceToolCall, Text: `"Paris"}`},
		{Kind: PieceToolCall, Name: "time", Index: 7, Text: `{}`}}
	r := ResponsesEncoder{ID: "resp_1", Model: "m", Created: 1700000000, PromptTokens: 3}
	cat := func(ps ...[]Piece) []Piece {
		var out []Piece
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	cases := []responsesCase{
		{"text", r, text, End{Usage: usage}},
		{"empty", r, nil, End{}},
		{"empty incomplete", r, nil, End{Finish: FinishLength}},
		{"incomplete", r, text, End{Finish: FinishLength, Usage: usage}},
		{"abort", r, text, End{Finish: FinishAbort}},
		{"stop sequence", r, text, End{StopSequence: "STOP"}},
		{"reasoning then text", r, cat(think, text), End{Usage: usage}},
		{"tool calls", r, calls, End{Usage: usage}},
		{"everything", r, cat(think, text, calls, text, calls[2:]), End{Usage: usage}},
		{"tool call without a name", r, []Piece{{Kind: PieceToolCall, Text: "{}"}}, End{}},
		{"negative created", ResponsesEncoder{ID: "x", Model: "m", Created: -5}, text, End{}},
		{"usage wraps", r, text, End{Usage: Usage{Prompt: 1<<32 - 1, Completion: 2, Cached: 1<<32 - 1}}},
	}
	for _, s := range tricky {
		cases = append(cases, responsesCase{"tricky " + s, ResponsesEncoder{ID: s, Model: s},
			[]Piece{{Kind: PieceReasoning, Text: s}, {Text: s}, {Kind: PieceToolCall, Name: s, Text: s}}, End{}})
	}
	return cases
}

// TestResponsesBodyIsMarshal holds the hand-written whole Responses
// answers to the bytes json.Marshal made of the old maps.
func TestResponsesBodyIsMarshal(t *testing.T) {
	for _, c := range responsesCases() {
		want := refResponsesBody(&c.enc, c.pieces, c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
		if got := c.feed().Close([]byte("x"), c.end); !bytes.Equal(got[1:], want) {
			t.Errorf("%s appended:\n got %s\nwant %s", c.name, got[1:], want)
		}
	}
}

func FuzzResponsesBody(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, s, s, false)
	}
	f.Fuzz(func(t *testing.T, id, text, reasoning, args string, cut bool) {
		c := responsesCase{enc: ResponsesEncoder{ID: id, Model: reasoning, Created: int64(len(text))},
			pieces: []Piece{{Kind: PieceReasoning, Text: reasoning}, {Text: text}, {Kind: PieceToolCall, Name: id, Text: args},
				{Kind: PieceToolCall, Text: text}, {Text: args}}}
		if cut {
			c.end.Finish = FinishLength
		}
		want := refResponsesBody(&c.enc, c.pieces, c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// TestResponsesBodyAllocs: Close writes a whole answer into the caller's
// buffer with nothing allocated.
func TestResponsesBodyAllocs(t *testing.T) {
	for _, c := range responsesCases() {
		o := c.feed()
		buf := o.Close(nil, c.end)
		if n := testing.AllocsPerRun(100, func() { buf = o.Close(buf[:0], c.end) }); n != 0 {
			t.Errorf("%s: %v allocations per body", c.name, n)
		}
	}
}

// BenchmarkResponsesBody compares the hand-written answer (hand) with
// the maps and json.Marshal it replaced (marshal).
func BenchmarkResponsesBody(b *testing.B) {
	for _, c := range responsesCases() {
		if c.name != "text" && c.name != "everything" {
			continue
		}
		b.Run(c.name+"/hand", func(b *testing.B) {
			o := c.feed()
			buf := o.Close(nil, c.end)
			b.ReportAllocs()
			for b.Loop() {
				buf = o.Close(buf[:0], c.end)
			}
		})
		b.Run(c.name+"/marshal", func(b *testing.B) {
			buf := c.feed().Close(nil, c.end)
			b.ReportAllocs()
			for b.Loop() {
				buf = append(buf[:0], refResponsesBody(&c.enc, c.pieces, c.end)...)
			}
		})
	}
}
