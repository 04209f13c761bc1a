package wire

import (
	"bytes"
	"errors"
	"testing"
)

// A GENERATE without flag SAMPLING is the version-1 layout byte for byte,
// whatever its Sampling holds: a router that leaves the flag off for an
// engine without FeatureSampling sends what that engine has always decoded.
func TestSamplingOnlyWhenFlagged(t *testing.T) {
	base := Generate{RequestID: []byte("r"), Model: []byte("m"), MaxTokens: 4, TopP: 1, DPRank: AnyRank,
		Prompt: TokensOf([]uint32{1, 2})}
	with := base
	with.Sampling = Sampling{PresencePenalty: 1, RepetitionPenalty: 1, MinTokens: 3, Flags: SampleLogprobs}
	a, _ := base.AppendPayload(nil)
	b, _ := with.AppendPayload(nil)
	if !bytes.Equal(a, b) {
		t.Fatal("sampling fields changed a GENERATE without flag SAMPLING")
	}
	if len(a) != base.PayloadSize() {
		t.Fatalf("PayloadSize %d, encoded %d", base.PayloadSize(), len(a))
	}
	with.Flags |= GenSampling
	c, _ := with.AppendPayload(nil)
	if len(c) != with.PayloadSize() || len(c) != len(a)+with.Sampling.size() {
		t.Fatalf("flagged GENERATE: %d bytes, PayloadSize %d", len(c), with.PayloadSize())
	}
	// A decoder from before the extension refuses flag bit 3 and trailing
	// bytes: emulate it by the version-1 flag mask and layout.
	var g Generate
	if err := g.Decode(c[:len(a)], nil); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadValue) {
		t.Fatalf("flagged GENERATE cut to the v1 layout decoded: %v", err)
	}
	if err := g.Decode(c, nil); err != nil || g.Sampling.MinTokens != 3 || !g.Sampling.Logprobs() {
		t.Fatalf("decoding: %v %+v", err, g.Sampling)
	}
}

func TestSamplingValidate(t *testing.T) {
	ok := Sampling{RepetitionPenalty: 1}
	for _, tc := range []struct {
		name string
		edit func(*Sampling)
	}{
		{"presence", func(s *Sampling) { s.PresencePenalty = 2.5 }},
		{"frequency", func(s *Sampling) { s.FrequencyPenalty = -3 }},
		{"repetition zero", func(s *Sampling) { s.RepetitionPenalty = 0 }},
		{"flags", func(s *Sampling) { s.Flags = 0x80 }},
		{"top without logprobs", func(s *Sampling) { s.TopLogprobs = 2 }},
		{"top over max", func(s *Sampling) { s.Flags, s.TopLogprobs = SampleLogprobs, MaxTopLogprobs+1 }},
		{"bias", func(s *Sampling) { s.LogitBias = LogitBiasOf([]uint32{1}, []float32{101}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			g := Generate{RequestID: []byte("r"), Model: []byte("m"), TopP: 1, Flags: GenSampling,
				Prompt: TokensOf([]uint32{1}), Sampling: s}
			p, err := g.AppendPayload(nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := new(Generate).Decode(p, nil); !errors.Is(err, ErrBadValue) {
				t.Fatalf("decoded %+v: %v", s, err)
			}
		})
	}
}

// TOKENS' logprobs section must cover exactly the frame's tokens, and a
// frame without flag LOGPROBS is the version-1 layout.
func TestLogprobsSection(t *testing.T) {
	lp, err := LogprobsOf(1, []LogprobEntry{{Logprob: -1, Top: []Alt{{5, -1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LogprobsOf(2, []LogprobEntry{{Logprob: -1, Top: []Alt{{5, -1}}}}); !errors.Is(err, ErrBadValue) {
		t.Fatalf("entry with too few alternatives: %v", err)
	}
	m := TokensMsg{Flags: TokLogprobs, Tokens: TokensOf([]uint32{5, 6}), Logprobs: lp}
	if _, err := m.AppendPayload(nil); !errors.Is(err, ErrBadValue) {
		t.Fatalf("1 entry for 2 tokens encoded: %v", err)
	}
	m.Tokens = TokensOf([]uint32{5})
	p, err := m.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got TokensMsg
	if err := got.Decode(p, nil); err != nil || got.Logprobs.Len() != 1 || got.Logprobs.Top(0, 0) != (Alt{5, -1}) {
		t.Fatalf("decoding: %v %+v", err, got.Logprobs.Entries())
	}
	plain := TokensMsg{Tokens: TokensOf([]uint32{5}), Logprobs: lp}
	q, _ := plain.AppendPayload(nil)
	if len(q) != len(p)-8-12 {
		t.Fatalf("unflagged TOKENS carried logprobs: %d bytes", len(q))
	}
}
