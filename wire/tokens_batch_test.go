package wire

import (
	"bytes"
	"errors"
	"testing"
)

// tokenBatchGoldenCases are the vectors of FeatureTokenBatch (PROTOCOL.md
// 6.2), appended to goldenCases.
func tokenBatchGoldenCases() []goldenCase {
	return []goldenCase{
		{name: "tokens_batch", about: "TOKENS with four tokens of four decode steps (FeatureTokenBatch in both HELLO and WELCOME), the stream's first frame, with their logprobs (1 alternative each)",
			stream: 5, msg: &TokensMsg{Flags: TokFirst | TokLogprobs, CachedTokens: 32, Tokens: TokensOf([]uint32{9707, 11, 1879, 0}),
				Logprobs: mustLogprobs(1, []LogprobEntry{
					{Logprob: -0.125, Top: []Alt{{9707, -0.125}}}, {Logprob: -0.5, Top: []Alt{{11, -0.5}}},
					{Logprob: -1, Top: []Alt{{1879, -1}}}, {Logprob: -0.25, Top: []Alt{{0, -0.25}}}})}},
		{name: "tokens_batch_text", about: "TOKENS with three tokens, their text (WANT_TEXT) and its spans (flag TEXT_SPANS): \"Hi\", \" caf\", and a token that is the first byte of \"é\", held back for the next frame (its end is the one before it)",
			stream: 5, msg: &TokensMsg{Flags: TokTextSpans, Tokens: TokensOf([]uint32{13048, 51950, 2634}),
				Text: []byte("Hi caf"), TextEnds: TextEndsOf([]uint32{2, 6, 6})}},
	}
}

func TestTextEnds(t *testing.T) {
	m := &TokensMsg{Flags: TokTextSpans, Tokens: TokensOf([]uint32{1, 2, 3}), Text: []byte("ab\xc3\xa9c"), TextEnds: TextEndsOf([]uint32{2, 2, 5})}
	b, err := AppendFrame(nil, 1, m)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(bytes.NewReader(b), nil).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var got TokensMsg
	if err := DecodeFrame(f, &got, nil); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i := range got.TextEnds.Len() {
		parts = append(parts, string(got.TextEnds.TokenText(got.Text, i)))
	}
	if len(parts) != 3 || parts[0] != "ab" || parts[1] != "" || parts[2] != "\xc3\xa9c" {
		t.Fatalf("token texts %q", parts)
	}
}

func TestTextEndsRefused(t *testing.T) {
	cases := []struct {
		name string
		ends []uint32
	}{
		{"decreasing", []uint32{3, 2, 5}},
		{"short of the text", []uint32{1, 2, 4}},
		{"past the text", []uint32{1, 2, 6}},
		{"one per token missing", []uint32{2, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &TokensMsg{Flags: TokTextSpans, Tokens: TokensOf([]uint32{1, 2, 3}), Text: []byte("abcde"), TextEnds: TextEndsOf(c.ends)}
			if _, err := m.AppendPayload(nil); !errors.Is(err, ErrBadValue) {
				t.Fatalf("encoding: %v, want ErrBadValue", err)
			}
			// The same payload written by hand reaches the decoder.
			e := encoder{}
			e.b, _ = (&TokensMsg{Tokens: m.Tokens, Text: m.Text}).AppendPayload(nil)
			e.b[0] = uint8(TokTextSpans)
			e.u32(uint32(len(c.ends)))
			for _, v := range c.ends {
				e.u32(v)
			}
			var got TokensMsg
			err := got.Decode(e.b, nil)
			if !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrLimit) {
				t.Fatalf("decoding: %v, want ErrBadValue", err)
			}
		})
	}
}
