package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// refAnthropicBody is how Close built a whole Messages body before it
// was written by hand: the blocks gathered as maps (a Collect each) and
// given to json.Marshal. It stays here as the reference.
func refAnthropicBody(o *AnthropicEncoder, pieces []Piece, e End) []byte {
	var blocks []any
	tools := 0
	var kind PieceKind
	var all *Collect
	flush := func() {
		if all == nil {
			return
		}
		switch kind {
		case PieceReasoning:
			blocks = append(blocks, map[string]any{"type": "thinking", "thinking": string(all.Reasoning), "signature": ""})
		case PieceToolCall:
			c := all.Calls[0]
			if !json.Valid([]byte(c.Arguments)) {
				blocks = append(blocks, map[string]any{"type": "text", "text": c.Arguments})
				break
			}
			blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_" + o.ID + "_" + strconv.Itoa(tools),
				"name": c.Name, "input": json.RawMessage(c.Arguments)})
			tools++
		default:
			blocks = append(blocks, map[string]any{"type": "text", "text": string(all.Text)})
		}
	}
	for _, p := range pieces {
		if all == nil || p.Kind != kind || p.Name != "" {
			flush()
			kind, all = p.Kind, &Collect{}
		}
		all.Add(p)
	}
	flush()
	if len(blocks) == 0 {
		blocks = []any{map[string]any{"type": "text", "text": ""}}
	}
	var seq any
	if e.StopSequence != "" {
		seq = e.StopSequence
	}
	b, err := json.Marshal(o.message(blocks, o.stopReason(e), seq, e.Usage))
	if err != nil {
		panic(err)
	}
	return b
}

// anthropicCase is a whole Messages response: its encoder, pieces and end.
type anthropicCase struct {
	name   string
	enc    AnthropicEncoder
	pieces []Piece
	end    End
}

func (c *anthropicCase) feed() *AnthropicEncoder {
	o := c.enc
	for _, p := range c.pieces {
		o.Delta(nil, p)
	}
	return &o
}

func anthropicCases() []anthropicCase {
	usage := Usage{Prompt: 12, Completion: 2, Cached: 8}
	text := []Piece{{Text: "Hé"}, {Text: "\n"}}
	think := []Piece{{Kind: PieceReasoning, Text: "let me <think>"}, {Kind: PieceReasoning, Text: "\u2028"}}
	calls := []Piece{{Kind: PieceToolCall, Name: "get_weather", Text: "{ \"city\" :\n\t"}, {Kind: PieceToolCall, Text: `"Pa\"ris <&> \u2028"}`},
		{Kind: PieceToolCall, Name: "time", Index: 1, Text: ` [1, {"a b": "c\\"}, "\u2029", null ] `}}
	m := AnthropicEncoder{ID: "msg_1", Model: "m"}
	cat := func(ps ...[]Piece) []Piece {
		var out []Piece
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	cases := []anthropicCase{
		{"text", m, text, End{Usage: usage}},
		{"empty", m, nil, End{Finish: FinishLength}},
		{"empty text piece", m, []Piece{{}}, End{}},
		{"max tokens", m, text, End{Finish: FinishLength, Usage: usage}},
		{"stop sequence", m, text, End{StopSequence: "</s>\n", Usage: usage}},
		{"abort", m, text, End{Finish: FinishAbort}},
		{"thinking then text", m, cat(think, text), End{Usage: usage}},
		{"tool calls", m, calls, End{Usage: usage}},
		{"everything", m, cat(think, text, calls, text), End{Usage: usage}},
		{"tool call cut off", m, calls[:1], End{Finish: FinishLength}},
		{"tool call not JSON then one that is", m, cat([]Piece{{Kind: PieceToolCall, Name: "a", Text: "{oops"}}, calls[2:]), End{}},
		{"tool call empty", m, []Piece{{Kind: PieceToolCall, Name: "a"}}, End{}},
		{"tool call no name", m, []Piece{{Kind: PieceToolCall, Text: "{}"}}, End{}},
		{"tool id to escape", AnthropicEncoder{ID: "m\"<\xe2\x80", Model: "m"}, calls, End{}},
		{"usage limits", m, text, End{Usage: Usage{Prompt: 1<<32 - 1, Completion: 1<<32 - 1, Cached: 1<<32 - 1}}},
	}
	for _, s := range tricky {
		cases = append(cases, anthropicCase{"tricky " + s, AnthropicEncoder{ID: s, Model: s},
			[]Piece{{Kind: PieceReasoning, Text: s}, {Text: s}, {Kind: PieceToolCall, Name: s, Text: s},
				{Kind: PieceToolCall, Name: s, Text: strconv.Quote(s)}}, End{StopSequence: s}})
	}
	return cases
}

// TestAnthropicBodyIsMarshal holds the hand-written whole Messages
// bodies to the bytes json.Marshal made of the old maps.
func TestAnthropicBodyIsMarshal(t *testing.T) {
	for _, c := range anthropicCases() {
		want := refAnthropicBody(c.feed(), c.pieces, c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
		if got := c.feed().Close([]byte("x"), c.end); !bytes.Equal(got[1:], want) {
			t.Errorf("%s appended:\n got %s\nwant %s", c.name, got[1:], want)
		}
	}
}

// TestCompactJSONIsMarshal: appendCompactJSON writes what json.Marshal
// makes of a json.RawMessage.
func TestCompactJSONIsMarshal(t *testing.T) {
	for _, s := range []string{`{}`, ` { "a" : [ 1 , 2.5e3 , true , null ] } `, "{\"<&>\":\"\u2028\u2029\\\"\\\\ \"}",
		`"\u003c"`, "[\"\xff\xe2\x80\"]", "\n\r\t 0 ", `{"k":"\\"}`} {
		want, err := json.Marshal(json.RawMessage(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := appendCompactJSON(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

func FuzzAnthropicBody(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, s, s, false)
	}
	f.Add("msg", "hi", "hm", ` {"a" : "<\u2028>"} `, true)
	f.Fuzz(func(t *testing.T, id, text, thinking, args string, stop bool) {
		c := anthropicCase{enc: AnthropicEncoder{ID: id, Model: thinking},
			pieces: []Piece{{Kind: PieceReasoning, Text: thinking}, {Text: text}, {Kind: PieceToolCall, Name: id, Text: args}, {Text: args}}}
		if stop {
			c.end.StopSequence = text
		}
		want := refAnthropicBody(c.feed(), c.pieces, c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// TestAnthropicBodyAllocs: Close writes a whole body into the caller's
// buffer with nothing allocated, for every case but tool arguments that
// are not JSON (json.Valid allocates its error).
func TestAnthropicBodyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("json.Valid's pooled scanner can allocate under -race")
	}
	for _, c := range anthropicCases() {
		o := c.feed()
		if !allToolsJSON(o) {
			continue
		}
		buf := o.Close(nil, c.end)
		if n := testing.AllocsPerRun(100, func() { buf = o.Close(buf[:0], c.end) }); n != 0 {
			t.Errorf("%s: %v allocations per body", c.name, n)
		}
	}
}

// BenchmarkAnthropicBody compares the hand-written body (hand) with the
// maps and json.Marshal it replaced (marshal).
func BenchmarkAnthropicBody(b *testing.B) {
	for _, c := range anthropicCases() {
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
			o := c.feed()
			buf := o.Close(nil, c.end)
			b.ReportAllocs()
			for b.Loop() {
				buf = append(buf[:0], refAnthropicBody(o, c.pieces, c.end)...)
			}
		})
	}
}

// allToolsJSON reports whether every tool call block of o holds JSON.
func allToolsJSON(o *AnthropicEncoder) bool {
	for _, b := range o.blocks {
		if b.kind == PieceToolCall && !json.Valid(o.text[b.start:b.end]) {
			return false
		}
	}
	return true
}
