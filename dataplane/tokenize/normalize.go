package tokenize

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization. normalize returns s
// itself when nothing changes, which is the common case, so most calls do
// not allocate.
type normalizer interface {
	normalize(s string) string
}

func newNormalizer(c *componentJSON) (normalizer, error) {
	if c == nil {
		return nil, nil
	}
	switch c.Type {
	case "NFC":
		return unicodeForm{norm.NFC}, nil
	case "NFKC":
		return unicodeForm{norm.NFKC}, nil
	case "NFD":
		return unicodeForm{norm.NFD}, nil
	case "NFKD":
		return unicodeForm{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
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

type unicodeForm struct{ form norm.Form }

func (u unicodeForm) normalize(s string) string {
	// QuickSpanString does not allocate (IsNormalString does); when it
	// cannot vouch for the whole string, String decides, and returns s
	// itself if it was normal after all.
	if u.form.QuickSpanString(s) == len(s) {
		return s
	}
	return u.form.String(s)
}

type lowercase struct{}

func (lowercase) normalize(s string) string { return strings.ToLower(s) }

type sequenceNormalizer []normalizer

func (seq sequenceNormalizer) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}
