package wire

import (
	"encoding/binary"
	"fmt"
)

// FeatureTokenBatch, in a HELLO, says the router takes TOKENS frames that
// carry several decode steps' tokens of one stream, and the text-spans
// section; in a WELCOME, that the engine sends them. An engine batches a
// stream's tokens only when both set the bit: a router from before it gets
// one frame per decode step, as v1 engines always sent (PROTOCOL.md 6.2).
//
// An engine batches only tokens it already has when it writes, holding
// none back to make a frame fuller: while its writes keep up, each step's
// tokens still go out as they are made.
const FeatureTokenBatch Feature = 1 << 16

// TokTextSpans (with FeatureTokenBatch only) marks a TOKENS frame whose
// text is followed by each token's end offset in it (TextEnds).
const TokTextSpans TokensFlags = 1 << 3

// TextEnds is a read-only view of a TOKENS frame's text spans: for each
// token, the offset in the frame's text where the text through that token
// ends. A decoded frame's TextEnds point into its payload.
//
//	| n u32 (= the frame's token count) | end u32 × n |
//
// Ends never decrease and the last is len(text): a token whose bytes
// finish no character (part of a UTF-8 sequence) ends where the one
// before it does.
type TextEnds struct{ b []byte }

// TextEndsOf views ends (little-endian on the wire; a copy is packed).
func TextEndsOf(ends []uint32) TextEnds {
	b := make([]byte, 0, 4*len(ends))
	for _, e := range ends {
		b = binary.LittleEndian.AppendUint32(b, e)
	}
	return TextEnds{b: b}
}

// Len returns the number of ends: the frame's token count.
func (t TextEnds) Len() int { return len(t.b) / 4 }

// At returns the end of token i's text.
func (t TextEnds) At(i int) uint32 { return binary.LittleEndian.Uint32(t.b[4*i:]) }

// TokenText returns token i's own text within text (the frame's Text).
func (t TextEnds) TokenText(text []byte, i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = t.At(i - 1)
	}
	return text[start:t.At(i)]
}

func (e *encoder) textEnds(t TextEnds, tokens int, text []byte) {
	err := t.check(len(text))
	if t.Len() != tokens {
		err = fmt.Errorf("TOKENS has %d text ends for %d tokens: %w", t.Len(), tokens, ErrBadValue)
	}
	if err != nil {
		if e.err == nil {
			e.err = fmt.Errorf("encoding %w", err)
		}
		return
	}
	e.u32(uint32(t.Len()))
	e.b = append(e.b, t.b...)
}

func decodeTextEnds(c *cursor, tokens, textLen int) TextEnds {
	n := c.count(4, 4, tokens, "text_ends")
	t := TextEnds{b: c.take(4*n, "text_ends")}
	if c.err == nil && n != tokens {
		c.fail(fmt.Errorf("%d text ends for %d tokens: %w", n, tokens, ErrBadValue), "text_ends")
	}
	if c.err == nil {
		if err := t.check(textLen); err != nil {
			c.fail(err, "text_ends")
		}
	}
	return t
}

// check reports ends that decrease or do not finish at textLen.
func (t TextEnds) check(textLen int) error {
	prev := uint32(0)
	for i := range t.Len() {
		end := t.At(i)
		if end < prev {
			return fmt.Errorf("TOKENS text end %d of token %d is before %d: %w", end, i, prev, ErrBadValue)
		}
		prev = end
	}
	if t.Len() > 0 && int(prev) != textLen {
		return fmt.Errorf("TOKENS text ends at %d of %d bytes: %w", prev, textLen, ErrBadValue)
	}
	return nil
}

// String lists the ends, as "[2 6 6]".
func (t TextEnds) String() string {
	ends := make([]uint32, t.Len())
	for i := range ends {
		ends[i] = t.At(i)
	}
	return fmt.Sprint(ends)
}
