package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// tricky are strings whose JSON escaping differs between careless
// encoders: HTML characters, controls, invalid UTF-8, U+2028/2029.
var tricky = []string{"", "plain", `quote " and \ back`, "<b>&amp;</b>", "tab\tnl\ncr\r\x00\x1f\x7f",
	"caf\xc3\xa9 日本語 🎉", "bad \xff\xfe utf-8 \xc3", "line\u2028para\u2029", "\xe2\x80", "emoji cut \xf0\x9f\x8e"}

func TestAppendJSONStringIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := append([]string(nil), tricky...)
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func TestAppendJSONFloatIsMarshal(t *testing.T) {
	for _, f := range []float32{0, -0.5, -1.25, -9999, -1e-7, -3.4e-8, -1e-6, -123456.7, -0.1, float32(math.Inf(-1))} {
		v := jsonLogprob(f)
		want, _ := json.Marshal(v)
		if got := appendJSONFloat(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("%v: got %s, want %s", f, got, want)
		}
	}
}

// streamCase is an encoder in the middle of a stream and the piece it
// is given again and again.
type streamCase struct {
	name  string
	enc   Encoder
	piece Piece
	lps   []TokenLogprob
}

func streamCases() []streamCase {
	lps := []TokenLogprob{{Token: "lo", Logprob: -0.25, Top: []TopLogprob{{"lo", -0.25}, {"<p>", -1.5}, {"lo", -2}}}}
	return []streamCase{
		{"completions", &OpenAIEncoder{ID: "cmpl-1", Model: "m", Created: 5, Stream: true}, Piece{Text: "hé<llo>\n"}, nil},
		{"completions logprobs", &OpenAIEncoder{ID: "cmpl-1", Model: "m", Stream: true, Logprobs: true}, Piece{Text: "lo"}, lps},
		{"chat", &OpenAIEncoder{ID: "c", Model: "m", Chat: true, Stream: true}, Piece{Text: "hello \xff"}, nil},
		{"chat logprobs", &OpenAIEncoder{ID: "c", Model: "m", Chat: true, Stream: true, Logprobs: true}, Piece{Text: "lo"}, lps},
		{"chat reasoning", &OpenAIEncoder{ID: "c", Model: "m", Chat: true, Stream: true}, Piece{Kind: PieceReasoning, Text: "think"}, nil},
		{"chat tool arguments", &OpenAIEncoder{ID: "c", Model: "m", Chat: true, Stream: true}, Piece{Kind: PieceToolCall, Index: 1, Text: `{"a":`}, nil},
		{"messages text", &AnthropicEncoder{ID: "msg", Model: "m", Stream: true}, Piece{Text: "hello"}, nil},
		{"messages thinking", &AnthropicEncoder{ID: "msg", Model: "m", Stream: true}, Piece{Kind: PieceReasoning, Text: "hm"}, nil},
		{"messages tool input", &AnthropicEncoder{ID: "msg", Model: "m", Stream: true}, Piece{Kind: PieceToolCall, Text: `"x"`}, nil},
		{"responses text", &ResponsesEncoder{ID: "resp", Model: "m", Stream: true}, Piece{Text: "hello"}, nil},
		{"responses reasoning", &ResponsesEncoder{ID: "resp", Model: "m", Stream: true}, Piece{Kind: PieceReasoning, Text: "hm"}, nil},
		{"responses arguments", &ResponsesEncoder{ID: "resp", Model: "m", Stream: true}, Piece{Kind: PieceToolCall, Text: "1}"}, nil},
	}
}

// warm opens c's stream and sends its first piece (a tool call's, with
// its name), so what follows is the steady per-token path.
func (c *streamCase) warm() []byte {
	b := c.enc.Open(nil)
	first := c.piece
	if first.Kind == PieceToolCall {
		first.Name = "f"
	}
	return c.next(b[:0], first)
}

func (c *streamCase) next(dst []byte, p Piece) []byte {
	if lp, ok := c.enc.(LogprobsEncoder); ok && c.lps != nil {
		lp.AddLogprobs(c.lps)
	}
	return c.enc.Delta(dst, p)
}

// TestStreamDeltaAllocs holds every encoder's per-token path to zero
// allocations: a streamed delta (with its logprobs) once the stream is
// open.
func TestStreamDeltaAllocs(t *testing.T) {
	for _, c := range streamCases() {
		t.Run(c.name, func(t *testing.T) {
			buf := c.warm()
			if n := testing.AllocsPerRun(200, func() { buf = c.next(buf[:0], c.piece) }); n != 0 {
				t.Fatalf("%v allocations per delta", n)
			}
		})
	}
}

// TestStreamDeltaIsMarshal checks that each hand-written event is the
// bytes encoding/json writes for the same values (keys sorted): decoding
// and marshalling it again changes nothing.
func TestStreamDeltaIsMarshal(t *testing.T) {
	for _, c := range streamCases() {
		for _, s := range tricky {
			if !utf8.ValidString(s) {
				continue // decoded, U+FFFD is written raw; TestAppendJSONStringIsMarshal covers these
			}
			p := c.piece
			p.Text = s
			buf := c.warm()
			buf = c.next(buf[:0], p)
			buf = c.enc.Close(buf, End{Finish: FinishStop, Usage: Usage{Prompt: 3, Completion: 4, Cached: 1}})
			for _, ev := range strings.Split(strings.TrimSuffix(string(buf), "\n\n"), "\n\n") {
				_, data, _ := strings.Cut(ev, "data: ")
				if data == "[DONE]" {
					continue
				}
				var v any
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Fatalf("%s %q: event %q: %v", c.name, s, data, err)
				}
				if again, _ := json.Marshal(v); string(again) != data {
					t.Fatalf("%s %q:\n got %s\nwant %s", c.name, s, data, again)
				}
			}
		}
	}
}

func BenchmarkStreamDelta(b *testing.B) {
	for _, c := range streamCases() {
		b.Run(c.name, func(b *testing.B) {
			buf := c.warm()
			b.ReportAllocs()
			b.SetBytes(int64(len(c.piece.Text)))
			for b.Loop() {
				buf = c.next(buf[:0], c.piece)
			}
		})
	}
}

// BenchmarkAppendJSONString escapes token-sized pieces of text as the
// streamed deltas do: mostly ASCII words, some accented and CJK text, the
// odd quote or newline.
func BenchmarkAppendJSONString(b *testing.B) {
	pieces := []string{" the", " router", ",", " café", "\n", " \"quoted\"", " 日本", "語", " tokens", " per", " second", "."}
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	dst := make([]byte, 0, 64)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pieces {
			dst = appendJSONString(dst[:0], p)
		}
	}
}
