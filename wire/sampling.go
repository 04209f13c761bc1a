package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FeatureSampling, in a WELCOME, says the engine honours GENERATE's
// sampling section (penalties, logit_bias, min_tokens, logprobs) and
// answers a request for logprobs with TOKENS' logprobs section. A router
// sends the section (flag GenSampling) only to an engine that announced
// the bit, so engines from before it never see a flag they refuse, and an
// engine sends TOKENS' section (flag TokLogprobs) only when a GENERATE
// asked for logprobs (PROTOCOL.md 6.1, 6.2).
const FeatureSampling Feature = 1 << 14

// MaxTopLogprobs is the most alternatives per token a GENERATE may ask
// for (OpenAI's chat limit; vLLM's default max_logprobs).
const MaxTopLogprobs = 20

// Sampling flags.
const (
	SampleLogprobs uint8 = 1 << 0 // TOKENS carry each token's logprob
	sampleDefined        = SampleLogprobs
)

// Sampling is GENERATE's sampling section, present when flag GenSampling
// is set. Its zero value is not "off": a sender sets RepetitionPenalty 1.
//
//	| presence_penalty f32 | frequency_penalty f32 | repetition_penalty f32 |
//	| min_tokens u32 | flags u8 | top_logprobs u8 | reserved u16 |
//	| logit_bias: u32 n, (token u32, bias f32) x n |
type Sampling struct {
	PresencePenalty   float32 // [-2, 2]; 0 off
	FrequencyPenalty  float32 // [-2, 2]; 0 off
	RepetitionPenalty float32 // (0, 2]; 1 off (vLLM's extension)
	MinTokens         uint32  // EOS and stop tokens are ignored before this many tokens
	Flags             uint8   // SampleLogprobs
	TopLogprobs       uint8   // alternatives per token, <= MaxTopLogprobs; needs SampleLogprobs
	LogitBias         LogitBias
}

// Logprobs reports whether the request asks for logprobs.
func (s *Sampling) Logprobs() bool { return s.Flags&SampleLogprobs != 0 }

const biasSize = 8

// LogitBias is a read-only view of packed (token u32, bias f32) pairs.
type LogitBias struct{ b []byte }

// Len returns the number of biased tokens.
func (l LogitBias) Len() int { return len(l.b) / biasSize }

// At returns the i-th token and its bias, added to its logit.
func (l LogitBias) At(i int) (token uint32, bias float32) {
	r := l.b[i*biasSize:]
	return binary.LittleEndian.Uint32(r), math.Float32frombits(binary.LittleEndian.Uint32(r[4:]))
}

// LogitBiasOf packs a token -> bias map's pairs (encoding side), in the
// order of tokens.
func LogitBiasOf(tokens []uint32, bias []float32) LogitBias {
	b := make([]byte, 0, len(tokens)*biasSize)
	for i, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(bias[i]))
	}
	return LogitBias{b: b}
}

func (s *Sampling) size() int { return 4*4 + 4 + 4 + biasSize*s.LogitBias.Len() }

func (s *Sampling) append(e *encoder) {
	e.f32(s.PresencePenalty)
	e.f32(s.FrequencyPenalty)
	e.f32(s.RepetitionPenalty)
	e.u32(s.MinTokens)
	e.u8(s.Flags)
	e.u8(s.TopLogprobs)
	e.zero(2)
	e.u32(uint32(s.LogitBias.Len()))
	e.b = append(e.b, s.LogitBias.b...)
}

func (s *Sampling) decode(c *cursor, lim *Limits) {
	s.PresencePenalty = c.f32("presence_penalty")
	s.FrequencyPenalty = c.f32("frequency_penalty")
	s.RepetitionPenalty = c.f32("repetition_penalty")
	s.MinTokens = c.u32("min_tokens")
	s.Flags = c.u8("sampling_flags")
	s.TopLogprobs = c.u8("top_logprobs")
	c.zero(2, "reserved")
	n := c.count(4, biasSize, lim.MaxListItems, "logit_bias")
	s.LogitBias = LogitBias{b: c.take(n*biasSize, "logit_bias")}
}

func (s *Sampling) validate() error {
	switch {
	case !(s.PresencePenalty >= -2 && s.PresencePenalty <= 2):
		return fmt.Errorf("presence_penalty %v: %w", s.PresencePenalty, ErrBadValue)
	case !(s.FrequencyPenalty >= -2 && s.FrequencyPenalty <= 2):
		return fmt.Errorf("frequency_penalty %v: %w", s.FrequencyPenalty, ErrBadValue)
	case !(s.RepetitionPenalty > 0 && s.RepetitionPenalty <= 2):
		return fmt.Errorf("repetition_penalty %v: %w", s.RepetitionPenalty, ErrBadValue)
	case s.Flags&^sampleDefined != 0:
		return fmt.Errorf("sampling flags %#x: %w", s.Flags, ErrBadValue)
	case s.TopLogprobs > MaxTopLogprobs || (s.TopLogprobs > 0 && !s.Logprobs()):
		return fmt.Errorf("top_logprobs %d: %w", s.TopLogprobs, ErrBadValue)
	}
	for i := range s.LogitBias.Len() {
		if _, b := s.LogitBias.At(i); !(b >= -100 && b <= 100) {
			return fmt.Errorf("logit_bias %v: %w", b, ErrBadValue)
		}
	}
	return nil
}
