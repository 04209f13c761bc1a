package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TokLogprobs marks a TOKENS frame that carries a logprobs section after
// text. An engine sets it only on the streams of a GENERATE whose sampling
// section asked for logprobs (FeatureSampling).
const TokLogprobs TokensFlags = 1 << 2

// Alt is one of a token's most likely alternatives.
type Alt struct {
	Token   uint32
	Logprob float32
}

// LogprobEntry is one generated token's logprob and its top alternatives,
// the encoding side of Logprobs.
type LogprobEntry struct {
	Logprob float32
	Top     []Alt
}

// Logprobs is TOKENS' logprobs section: for each token of the frame, its
// logprob then top_n alternatives, most likely first. A read-only view.
//
//	| top_n u8 | reserved [3] | n u32 (= the frame's token count) |
//	| (logprob f32, (token u32, logprob f32) x top_n) x n |
type Logprobs struct {
	topN int
	b    []byte
}

// LogprobsOf packs entries, each with exactly topN alternatives (encoding
// side); it reports an entry with another count.
func LogprobsOf(topN int, entries []LogprobEntry) (Logprobs, error) {
	if topN > MaxTopLogprobs || topN < 0 {
		return Logprobs{}, fmt.Errorf("logprobs: top_n %d: %w", topN, ErrBadValue)
	}
	b := make([]byte, 0, len(entries)*(4+8*topN))
	for i, en := range entries {
		if len(en.Top) != topN {
			return Logprobs{}, fmt.Errorf("logprobs: entry %d has %d alternatives, not %d: %w", i, len(en.Top), topN, ErrBadValue)
		}
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(en.Logprob))
		for _, a := range en.Top {
			b = binary.LittleEndian.AppendUint32(b, a.Token)
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(a.Logprob))
		}
	}
	return Logprobs{topN: topN, b: b}, nil
}

func (l Logprobs) entrySize() int { return 4 + 8*l.topN }

// Len returns the number of tokens the section covers.
func (l Logprobs) Len() int { return len(l.b) / l.entrySize() }

// TopN returns the number of alternatives per token.
func (l Logprobs) TopN() int { return l.topN }

// Logprob returns the i-th token's logprob.
func (l Logprobs) Logprob(i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(l.b[i*l.entrySize():]))
}

// Top returns the i-th token's j-th alternative.
func (l Logprobs) Top(i, j int) Alt {
	r := l.b[i*l.entrySize()+4+8*j:]
	return Alt{Token: binary.LittleEndian.Uint32(r), Logprob: math.Float32frombits(binary.LittleEndian.Uint32(r[4:]))}
}

// Entries unpacks the view (tests, dumps).
func (l Logprobs) Entries() []LogprobEntry {
	out := make([]LogprobEntry, l.Len())
	for i := range out {
		out[i].Logprob = l.Logprob(i)
		for j := range l.topN {
			out[i].Top = append(out[i].Top, l.Top(i, j))
		}
	}
	return out
}

func (l Logprobs) append(e *encoder, tokens int) {
	if l.Len() != tokens && e.err == nil {
		e.err = fmt.Errorf("encoding TOKENS logprobs: %d entries for %d tokens: %w", l.Len(), tokens, ErrBadValue)
	}
	e.u8(uint8(l.topN))
	e.zero(3)
	e.u32(uint32(l.Len()))
	e.b = append(e.b, l.b...)
}

func decodeLogprobs(c *cursor, tokens int) Logprobs {
	topN := int(c.u8("top_n"))
	c.zero(3, "reserved")
	if c.err == nil && topN > MaxTopLogprobs {
		c.fail(fmt.Errorf("top_n %d: %w", topN, ErrBadValue), "logprobs")
		return Logprobs{}
	}
	l := Logprobs{topN: topN}
	n := c.count(4, l.entrySize(), tokens, "logprobs")
	if c.err == nil && n != tokens {
		c.fail(fmt.Errorf("%d entries for %d tokens: %w", n, tokens, ErrBadValue), "logprobs")
		return Logprobs{}
	}
	l.b = c.take(n*l.entrySize(), "logprobs")
	return l
}
