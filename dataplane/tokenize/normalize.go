package tokenize

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization. normalize returns s
// itself when nothing changes, which is the common case, so most calls do
// not allocate; a rewrite that always changes the text (Prepend, Replace)
// builds it in the arena, when there is one.
type normalizer interface {
	normalize(s string, a *textArena) string
}

func newNormalizer(c *componentJSON) (normalizer, error) {
	if c == nil {
		return nil, nil
	}
	switch c.Type {
	case "NFC":
		return unicodeForm{norm.NFC, true}, nil
	case "NFKC":
		return unicodeForm{norm.NFKC, true}, nil
	case "NFD":
		return unicodeForm{norm.NFD, false}, nil
	case "NFKD":
		return unicodeForm{norm.NFKD, false}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Prepend", "Replace", "Precompiled":
		return newSentencePieceNormalizer(c)
	case "Sequence":
		var seq sequenceNormalizer
		for i, sub := range c.Normalizers {
			n, err := newNormalizer(sub)
			if err != nil {
				return nil, err
			}
			if n == nil {
				return nil, unsupported("normalizer Sequence item %d is null", i)
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, unsupported("normalizer %q", c.Type)
}

type unicodeForm struct {
	form norm.Form
	// composing forms (NFC, NFKC) pass over stable characters (stableLen).
	composing bool
}

func (u unicodeForm) normalize(s string, _ *textArena) string {
	if !u.composing {
		return u.whole(s)
	}
	// Composing forms: stable characters are passed over by a byte loop,
	// and only the runs between them go to the quick check, each with the
	// stable character before it (a mark may compose with it).
	last := 0 // the start of the last stable character: a place to cut
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf { // ASCII: most text, tested first
			j := asciiRun(s, i)
			last, i = j-1, j
			continue
		}
		if n := stableLen(s[i:]); n > 0 {
			last, i = i, i+n
			continue
		}
		j := i
		for j < len(s) && stableLen(s[j:]) == 0 {
			r, w := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError && w == 1 {
				// Broken UTF-8: x/text reads a bad byte together with what
				// follows it, so the string may not be cut. (Encode makes
				// text valid first; this keeps normalize exact anyway.)
				return u.whole(s)
			}
			j += w
		}
		if u.form.QuickSpanString(s[last:j]) != j-last {
			return s[:last] + u.form.String(s[last:])
		}
		i = j
	}
	return s
}

// whole normalises s in one piece. QuickSpanString does not allocate
// (IsNormalString does); when it cannot vouch for s, String decides, and
// returns s itself if it was normal after all.
func (u unicodeForm) whole(s string) string {
	if u.form.QuickSpanString(s) == len(s) {
		return s
	}
	return u.form.String(s)
}

// stableLen returns the length of the first character of s if it is ASCII
// or a CJK Unified Ideograph (U+3400-U+9FFF, extension A included), and 0
// otherwise. NFC and NFKC leave these characters alone whatever surrounds
// them: no decomposition, combining class 0, quick-check Yes, and nothing
// composes with a character before them, so a string may be cut before
// any of them and normalised piecewise. A byte test is several times faster
// than the normaliser's own quick check over Chinese or Japanese text.
func stableLen(s string) int {
	switch c := s[0]; {
	case c < utf8.RuneSelf:
		return 1
	case c >= 0xe3 && c <= 0xe9 && len(s) >= 3 && s[1]&0xc0 == 0x80 && s[2]&0xc0 == 0x80 &&
		(c != 0xe3 || s[1] >= 0x90):
		return 3
	}
	return 0
}

type lowercase struct{}

func (lowercase) normalize(s string, _ *textArena) string { return strings.ToLower(s) }

type sequenceNormalizer []normalizer

func (seq sequenceNormalizer) normalize(s string, a *textArena) string {
	for _, n := range seq {
		s = n.normalize(s, a)
	}
	return s
}
