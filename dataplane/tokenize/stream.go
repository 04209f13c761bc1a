package tokenize

import (
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Stream detokenizes generated ids incrementally, as streamed API responses
// need: each Next returns the text completed by the new ids. For a
// byte-level tokenizer it holds back bytes of a UTF-8 sequence that the
// next ids may finish (a token can end mid-character). For a
// SentencePiece-style one it works as tokenizers' DecodeStream does
// (src/tokenizer/mod.rs, 3ba8ad0), which vLLM uses: the ids since the
// last text emitted are decoded together with the ids of that text, and
// what goes beyond that text is emitted unless it ends in U+FFFD (an
// unfinished run of byte tokens), so a leading space is stripped only at
// the start of the stream and a character spelled in byte tokens comes
// out whole. Not safe for concurrent use.
type Stream struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
	invalid     []byte // Next's copy of text to rewrite as valid UTF-8
	// SentencePiece-style: ids decoded as context and new, the text of
	// the first prefixLen of them (already emitted).
	ids       []uint32
	prefix    string
	prefixLen int
}

// NewStream returns a streaming detokenizer.
func (t *Tokenizer) NewStream(skipSpecial bool) *Stream {
	return &Stream{t: t, skipSpecial: skipSpecial}
}

// Reset makes s a new stream of t, as t.NewStream(skipSpecial) would
// return, keeping its buffers.
func (s *Stream) Reset(t *Tokenizer, skipSpecial bool) {
	*s = Stream{t: t, skipSpecial: skipSpecial, pending: s.pending[:0], invalid: s.invalid[:0], ids: s.ids[:0]}
}

// Held is the room, in bytes, of the buffers Reset keeps.
func (s *Stream) Held() int { return cap(s.pending) + cap(s.invalid) + 4*cap(s.ids) }

// Prime gives the stream the prompt the generated ids follow, as vLLM
// primes its DecodeStream (FastIncrementalDetokenizer in
// vllm/v1/engine/detokenizer.py): with the shortest suffix of 4 to 23 of
// the prompt's ids that decodes without U+FFFD (or the whole prompt), its
// text not emitted. The first generated token then decodes as it does
// after that text, so a SentencePiece model's leading space is kept as
// the engine's own detokenizer keeps it. Byte-level decoding does not
// depend on the text before, and ignores it. Call it before Next.
func (s *Stream) Prime(prompt []uint32) {
	if s.t.dec == nil {
		return
	}
	suffix := prompt
	if len(prompt) > 4 {
		for i := 4; i < min(len(prompt)+1, 24); i++ {
			if !strings.Contains(s.t.decodeChain(prompt[len(prompt)-i:], false), "\uFFFD") {
				suffix = prompt[len(prompt)-i:]
				break
			}
		}
	}
	for _, id := range suffix {
		s.step(nil, id)
	}
}

// Next appends to dst the text that ids complete.
func (s *Stream) Next(dst []byte, ids []uint32) []byte {
	if s.t.dec != nil {
		for _, id := range ids {
			dst = s.step(dst, id)
		}
		return dst
	}
	// The bytes held back and the ids' bytes go straight into dst; an
	// unfinished sequence at the end goes back to pending, and only text
	// that is not valid UTF-8 is rewritten. Whole tokens after nothing
	// held back, most of any text, need neither.
	start := len(dst)
	dst = append(dst, s.pending...)
	dst, whole := s.t.bytes().appendIDs(dst, ids, s.skipSpecial)
	if whole && len(s.pending) == 0 {
		return dst
	}
	keep := incompleteTail(dst[start:])
	s.pending = append(s.pending[:0], dst[len(dst)-keep:]...)
	dst = dst[:len(dst)-keep]
	if !utf8.Valid(dst[start:]) { // rewritten from a copy: U+FFFD is longer than the byte it replaces
		s.invalid = append(s.invalid[:0], dst[start:]...)
		dst = appendValidUTF8(dst[:start], unsafe.String(&s.invalid[0], len(s.invalid)))
	}
	return dst
}

// step is DecodeStream's step for one id.
func (s *Stream) step(dst []byte, id uint32) []byte {
	s.ids = append(s.ids, id)
	text := s.t.decodeChain(s.ids, s.skipSpecial)
	if len(text) <= len(s.prefix) || strings.HasSuffix(text, "\uFFFD") {
		return dst
	}
	dst = appendBeyond(dst, text, s.prefix)
	n := copy(s.ids, s.ids[s.prefixLen:])
	s.ids = s.ids[:n]
	s.prefix = s.t.decodeChain(s.ids, s.skipSpecial)
	s.prefixLen = n
	return dst
}

// appendBeyond appends what text has beyond prefix. If text does not start
// with prefix (a decoder that rewrites earlier text; tokenizers reports
// an error there) it appends text from the first difference.
func appendBeyond(dst []byte, text, prefix string) []byte {
	if strings.HasPrefix(text, prefix) {
		return append(dst, text[len(prefix):]...)
	}
	i := 0
	for i < len(prefix) && i < len(text) && prefix[i] == text[i] {
		i++
	}
	return append(dst, text[i:]...)
}

// Flush appends whatever is held back, with any incomplete sequence replaced
// by U+FFFD, and resets the stream.
func (s *Stream) Flush(dst []byte) []byte {
	if s.t.dec != nil {
		if text := s.t.decodeChain(s.ids, s.skipSpecial); len(text) > len(s.prefix) {
			dst = appendBeyond(dst, text, s.prefix)
		}
		s.ids, s.prefix, s.prefixLen = s.ids[:0], "", 0
		return dst
	}
	dst = append(dst, toValidUTF8(string(s.pending))...)
	s.pending = s.pending[:0]
	return dst
}
