package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// refOpenAIMessage and refOpenAIBody are how Close built a whole OpenAI
// body before it was written by hand: maps given to json.Marshal. They
// stay here as the reference its bytes must equal.
func refOpenAIMessage(o *OpenAIEncoder) map[string]any {
	msg := map[string]any{"role": "assistant", "content": string(o.all.Text)}
	if len(o.all.Reasoning) > 0 {
		msg["reasoning_content"] = string(o.all.Reasoning)
	}
	if len(o.all.Calls) > 0 {
		calls := make([]any, len(o.all.Calls))
		for i, c := range o.all.Calls {
			calls[i] = map[string]any{"id": o.callID(i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
		}
		msg["tool_calls"] = calls
		if len(o.all.Text) == 0 {
			msg["content"] = nil
		}
	}
	return msg
}

func refOpenAIBody(o *OpenAIEncoder, e End) []byte {
	reason := o.finishReason(e.Finish)
	o.textOffset = len(o.Echo)
	choice := map[string]any{"index": o.Index, "logprobs": o.takeLogprobs(), "finish_reason": reason}
	if o.Chat {
		choice["message"] = refOpenAIMessage(o)
	} else {
		choice["text"] = o.Echo + string(o.all.Text)
	}
	if e.StopSequence != "" {
		choice["stop_reason"] = e.StopSequence
	}
	b, _ := json.Marshal(map[string]any{"id": o.ID, "object": o.object(), "created": o.Created, "model": o.Model,
		"choices": []any{choice}, "usage": openAIUsage(e.Usage)})
	return b
}

// bodyCase is a whole OpenAI response: the encoder's settings, the
// pieces and logprobs it is given, and how it ends.
type bodyCase struct {
	name   string
	enc    OpenAIEncoder
	pieces []Piece
	lps    []TokenLogprob
	end    End
}

// feed gives a fresh copy of c's encoder its pieces and logprobs.
func (c *bodyCase) feed() *OpenAIEncoder {
	o := c.enc
	for _, p := range c.pieces {
		o.Delta(nil, p)
	}
	if c.lps != nil {
		o.AddLogprobs(c.lps)
	}
	return &o
}

func bodyCases() []bodyCase {
	lps := []TokenLogprob{
		{Token: "Hé", Logprob: -0.25, Top: []TopLogprob{{"Hé", -0.25}, {"<p>", -1.5}, {"Hé", -2}, {"\xff", -1e-7}}},
		{Token: "\n", Logprob: float32(-1e30), Top: nil},
	}
	usage := Usage{Prompt: 12, Completion: 2, Cached: 8}
	text := []Piece{{Text: "Hé"}, {Text: "\n"}}
	calls := []Piece{{Kind: PieceToolCall, Name: "get_weather", Text: `{"city":`}, {Kind: PieceToolCall, Text: `"Paris"}`},
		{Kind: PieceToolCall, Name: "time", Index: 1, Text: `{}`}}
	cases := []bodyCase{
		{"completions", OpenAIEncoder{ID: "cmpl-1", Model: "m", Created: 5}, text, nil, End{Usage: usage}},
		{"completions empty", OpenAIEncoder{ID: "cmpl-1", Model: "m"}, nil, nil, End{Finish: FinishLength}},
		{"completions logprobs echo", OpenAIEncoder{ID: "cmpl-1", Model: "m", Logprobs: true, Echo: "Say: "}, text, lps, End{Usage: usage}},
		{"completions logprobs none", OpenAIEncoder{ID: "cmpl-1", Model: "m", Logprobs: true}, text, nil, End{}},
		{"completions echo joins a rune", OpenAIEncoder{ID: "cmpl-1", Model: "m", Echo: "cut \xe2\x80"}, []Piece{{Text: "\xa8 on"}}, nil, End{}},
		{"completions echo bad tail", OpenAIEncoder{ID: "cmpl-1", Model: "m", Echo: "bad \xff"}, []Piece{{Text: "\x80x"}}, nil, End{}},
		{"completions stop sequence", OpenAIEncoder{ID: "cmpl-1", Model: "m"}, text, nil, End{StopSequence: "</s>\n", Usage: usage}},
		{"completions abort index", OpenAIEncoder{ID: "cmpl-1", Model: "m", Index: 3, Part: true}, text, nil, End{Finish: FinishAbort}},
		{"chat", OpenAIEncoder{ID: "chatcmpl-1", Model: "m", Created: 1700000000, Chat: true}, text, nil, End{Usage: usage}},
		{"chat empty", OpenAIEncoder{ID: "c", Model: "m", Chat: true}, nil, nil, End{Finish: FinishLength}},
		{"chat logprobs", OpenAIEncoder{ID: "c", Model: "m", Chat: true, Logprobs: true}, text, lps, End{Usage: usage}},
		{"chat logprobs none", OpenAIEncoder{ID: "c", Model: "m", Chat: true, Logprobs: true}, text, nil, End{}},
		{"chat reasoning", OpenAIEncoder{ID: "c", Model: "m", Chat: true},
			append([]Piece{{Kind: PieceReasoning, Text: "let me <think>"}, {Kind: PieceReasoning, Text: "\u2028"}}, text...), nil, End{Usage: usage}},
		{"chat tool calls", OpenAIEncoder{ID: "c", Model: "m", Chat: true}, calls, nil, End{Usage: usage}},
		{"chat tool calls with text and reasoning", OpenAIEncoder{ID: "c\"<id>", Model: "m", Chat: true},
			append(append([]Piece{{Kind: PieceReasoning, Text: "hm"}}, text...), calls...), nil, End{Usage: usage}},
		{"chat tool calls cut off", OpenAIEncoder{ID: "c", Model: "m", Chat: true}, calls[:2], nil, End{Finish: FinishLength}},
		{"chat stop sequence index", OpenAIEncoder{ID: "c", Model: "m", Chat: true, Index: 1, Part: true}, text, nil,
			End{StopSequence: "STOP", Usage: Usage{Prompt: 1<<32 - 1, Completion: 3}}},
	}
	for _, s := range tricky {
		for _, chat := range []bool{false, true} {
			cases = append(cases, bodyCase{"tricky " + s, OpenAIEncoder{ID: s, Model: s, Chat: chat, Echo: s, Logprobs: true},
				[]Piece{{Kind: PieceReasoning, Text: s}, {Text: s}, {Kind: PieceToolCall, Name: s, Text: s}},
				[]TokenLogprob{{Token: s, Top: []TopLogprob{{s, -1}, {"a", -2}}}}, End{StopSequence: s}})
		}
	}
	return cases
}

// TestOpenAIBodyIsMarshal holds the hand-written whole bodies to the
// bytes of the maps json.Marshal was given before.
func TestOpenAIBodyIsMarshal(t *testing.T) {
	for _, c := range bodyCases() {
		want := refOpenAIBody(c.feed(), c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
		// appended after other bytes, as the gateway does into its buffer
		if got := c.feed().Close([]byte("x"), c.end); !bytes.Equal(got[1:], want) {
			t.Errorf("%s appended:\n got %s\nwant %s", c.name, got[1:], want)
		}
	}
}

func FuzzOpenAIBody(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, s, s, s, s, false)
	}
	f.Add("Say: \xe2", "\x80\xa8", "", "{}", "", false)
	f.Fuzz(func(t *testing.T, id, text, reasoning, args, echo string, chat bool) {
		c := bodyCase{enc: OpenAIEncoder{ID: id, Model: reasoning, Chat: chat, Echo: echo, Logprobs: len(text)%2 == 0},
			pieces: []Piece{{Kind: PieceReasoning, Text: reasoning}, {Text: text}, {Kind: PieceToolCall, Name: id, Text: args}},
			lps:    []TokenLogprob{{Token: text, Top: []TopLogprob{{args, -1}, {echo, -2}}}}, end: End{StopSequence: echo}}
		if args == "" {
			c.pieces = c.pieces[:2]
		}
		want := refOpenAIBody(c.feed(), c.end)
		if got := c.feed().Close(nil, c.end); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// TestOpenAIBodyAllocs: a whole body is written into the caller's buffer
// with nothing allocated, for every case but an echo that is not valid
// UTF-8 (joined to the output before it is escaped).
func TestOpenAIBodyAllocs(t *testing.T) {
	for _, c := range bodyCases() {
		o := c.feed()
		if o.Echo != "" && !utf8.ValidString(o.Echo) {
			continue
		}
		buf := o.Close(nil, c.end)
		n := testing.AllocsPerRun(100, func() {
			if c.lps != nil {
				o.AddLogprobs(c.lps)
			}
			buf = o.Close(buf[:0], c.end)
		})
		if n != 0 {
			t.Errorf("%s: %v allocations per body", c.name, n)
		}
	}
}

// BenchmarkCloseBody compares the hand-written body (hand) with the
// maps and json.Marshal it replaced (marshal), for a 1-token completion
// as under wrk and for a chat with everything.
func BenchmarkCloseBody(b *testing.B) {
	one := []Piece{{Text: "Hi"}}
	usage := Usage{Prompt: 20, Completion: 1, Cached: 16}
	cases := []bodyCase{
		{"completions 1 token", OpenAIEncoder{ID: "cmpl-0123456789", Model: "Qwen/Qwen3-8B", Created: 1700000000}, one, nil, End{Usage: usage}},
		{"chat 1 token", OpenAIEncoder{ID: "chatcmpl-0123456789", Model: "Qwen/Qwen3-8B", Created: 1700000000, Chat: true}, one, nil, End{Usage: usage}},
	}
	for _, c := range bodyCases() {
		if c.name == "chat tool calls with text and reasoning" || c.name == "chat logprobs" {
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		b.Run(c.name+"/hand", func(b *testing.B) {
			o := c.feed()
			buf := o.Close(nil, c.end)
			b.ReportAllocs()
			for b.Loop() {
				if c.lps != nil {
					o.AddLogprobs(c.lps)
				}
				buf = o.Close(buf[:0], c.end)
			}
		})
		b.Run(c.name+"/marshal", func(b *testing.B) {
			o := c.feed()
			buf := o.Close(nil, c.end)
			b.ReportAllocs()
			for b.Loop() {
				if c.lps != nil {
					o.AddLogprobs(c.lps)
				}
				buf = append(buf[:0], refOpenAIBody(o, c.end)...)
			}
		})
	}
}
