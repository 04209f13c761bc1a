package tokenize

// Stream detokenizes generated ids incrementally, as streamed API responses
// need: each Next returns the text completed by the new ids, holding back
// bytes of a UTF-8 sequence that the next ids may finish (a byte-level
// token can end mid-character). Not safe for concurrent use.
type Stream struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
}

// NewStream returns a streaming detokenizer.
func (t *Tokenizer) NewStream(skipSpecial bool) *Stream {
	return &Stream{t: t, skipSpecial: skipSpecial}
}

// Next appends to dst the text that ids complete.
func (s *Stream) Next(dst []byte, ids []uint32) []byte {
	s.pending = s.t.Decode(s.pending, ids, s.skipSpecial)
	keep := incompleteTail(s.pending)
	ready := s.pending[:len(s.pending)-keep]
	dst = append(dst, toValidUTF8(string(ready))...)
	n := copy(s.pending, s.pending[len(ready):])
	s.pending = s.pending[:n]
	return dst
}

// Flush appends whatever is held back, with any incomplete sequence replaced
// by U+FFFD, and resets the stream.
func (s *Stream) Flush(dst []byte) []byte {
	dst = append(dst, toValidUTF8(string(s.pending))...)
	s.pending = s.pending[:0]
	return dst
}
