package tokenize

import (
	"strings"
	"sync"
	"unsafe"
)

// SentencePiece-style normalizers, as Hugging Face tokenizers implements
// them (src/normalizers/prepend.rs and replace.rs, 3ba8ad0): Prepend puts
// its text before any non-empty input; Replace rewrites every
// non-overlapping occurrence of a literal, left to right.

func newSentencePieceNormalizer(c *componentJSON) (normalizer, error) {
	switch c.Type {
	case "Prepend":
		if c.Prepend == nil {
			return nil, unsupported("normalizer Prepend without prepend")
		}
		return prependNormalizer{*c.Prepend}, nil
	case "Replace":
		old, err := literalPattern("Replace normalizer", c.Pattern)
		if err != nil {
			return nil, err
		}
		if c.Content == nil {
			return nil, unsupported("normalizer Replace without content")
		}
		return replaceNormalizer{old: old, new: *c.Content}, nil
	case "Precompiled":
		return newPrecompiled(c.PrecompiledCharsmap)
	}
	return nil, unsupported("normalizer %q", c.Type)
}

// literalPattern returns the String of a Split or Replace pattern. A Regex
// is refused: tokenizers runs it with Oniguruma, whose semantics RE2 does
// not promise to match.
func literalPattern(part string, p *patternJSON) (string, error) {
	switch {
	case p == nil:
		return "", unsupported("%s without a pattern", part)
	case p.String != nil && *p.String != "":
		return *p.String, nil
	case p.Regex != nil:
		return "", unsupported("%s with a Regex pattern %q (only a String)", part, *p.Regex)
	}
	return "", unsupported("%s with an empty pattern", part)
}

type prependNormalizer struct{ prefix string }

func (p prependNormalizer) normalize(s string, a *textArena) string {
	if s == "" {
		return s
	}
	b := a.normBuf(len(p.prefix) + len(s))
	b = append(append(b, p.prefix...), s...)
	return a.keepNorm(b)
}

type replaceNormalizer struct{ old, new string }

func (r replaceNormalizer) normalize(s string, a *textArena) string {
	i := strings.Index(s, r.old)
	if i < 0 {
		return s
	}
	b := a.normBuf(len(s) + len(s)/2)
	b = appendReplaced(b, s, r.old, r.new, i)
	return a.keepNorm(b)
}

// appendReplaced appends s with every old replaced by new; i is the first
// occurrence.
func appendReplaced(b []byte, s, old, new string, i int) []byte {
	for i >= 0 {
		b = append(append(b, s[:i]...), new...)
		s = s[i+len(old):]
		i = strings.Index(s, old)
	}
	return append(b, s...)
}

// textArena holds the text an Encode call rewrites (normalized segments,
// Metaspace's form of each piece) in buffers reused from call to call, so
// a SentencePiece-style tokenizer does not allocate per call either. The
// strings it returns alias its buffers: they live until the call ends and
// are copied wherever they are kept (the piece cache clones its keys).
// Normalization alternates between two buffers, so each step of a
// Sequence reads the previous step's text while writing its own; the
// pre-tokenizer has a third, as the normalized segment is still being read
// while each piece is rewritten. A nil arena allocates.
type textArena struct {
	norm [2][]byte
	flip int
	pre  []byte
}

var arenaPool = sync.Pool{New: func() any { return new(textArena) }}

// arenaKeep is the largest buffer an arena keeps between calls.
const arenaKeep = 1 << 20

func getArena() *textArena { return arenaPool.Get().(*textArena) }

func (a *textArena) release() {
	if cap(a.norm[0]) <= arenaKeep && cap(a.norm[1]) <= arenaKeep && cap(a.pre) <= arenaKeep {
		arenaPool.Put(a)
	}
}

// normBuf returns the empty normalization buffer not holding the last
// step's text, with room for n bytes.
func (a *textArena) normBuf(n int) []byte {
	if a == nil {
		return make([]byte, 0, n)
	}
	a.flip ^= 1
	return growBuf(a.norm[a.flip][:0], n)
}

// keepNorm stores b, the buffer normBuf returned, and returns it as text.
func (a *textArena) keepNorm(b []byte) string {
	if a == nil {
		return string(b)
	}
	a.norm[a.flip] = b
	return aliasString(b)
}

// preBuf and keepPre are normBuf and keepNorm for the pre-tokenizer.
func (a *textArena) preBuf(n int) []byte {
	if a == nil {
		return make([]byte, 0, n)
	}
	return growBuf(a.pre[:0], n)
}

func (a *textArena) keepPre(b []byte) string {
	if a == nil {
		return string(b)
	}
	a.pre = b
	return aliasString(b)
}

func growBuf(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, 0, n)
	}
	return b
}

// aliasString views b as a string without copying; b must not change while
// the string is in use (see textArena).
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
