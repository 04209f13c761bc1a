package media

import (
	"fmt"
	"slices"
)

// Range is an image's placeholder range in a prompt's token ids: the
// tokens its expansion replaced the template's marker with, as vLLM's
// PlaceholderRange (offset, length) covers a PromptReplacement's whole
// replacement (the feature tokens and their delimiters). The image's id
// is an extra key of every block this range overlaps.
type Range struct {
	Offset, Length int
}

// Vocab maps the tokens of an expansion onto ids: Token for a special
// token (false if the vocabulary lacks it), Encode for a Text run.
type Vocab interface {
	Token(s string) (uint32, bool)
	Encode(text string) []uint32
}

// Place replaces the k-th marker token of ids with the k-th expansion,
// each run's tokens in order (a Text run encoded on its own, as vLLM
// tokenizes a replacement string), and returns the new ids with each
// image's range. The number of markers must be the number of
// expansions: a template that dropped or repeated an image is refused.
func Place(ids []uint32, marker uint32, exps []Expansion, v Vocab) ([]uint32, []Range, error) {
	out := make([]uint32, 0, len(ids)+expandedLen(exps))
	ranges := make([]Range, 0, len(exps))
	for len(ids) > 0 {
		i := slices.Index(ids, marker)
		if i < 0 {
			out = append(out, ids...)
			break
		}
		out = append(out, ids[:i]...)
		ids = ids[i+1:]
		if len(ranges) == len(exps) {
			return nil, nil, fmt.Errorf("%w: the prompt has more image markers than the %d images", ErrPlacement, len(exps))
		}
		start := len(out)
		for _, r := range exps[len(ranges)].Runs {
			if r.Text {
				for range r.Count {
					out = append(out, v.Encode(r.Token)...)
				}
				continue
			}
			tok, ok := v.Token(r.Token)
			if !ok {
				return nil, nil, fmt.Errorf("%w: the vocabulary has no %s token", ErrNoProcessor, r.Token)
			}
			n := len(out)
			out = slices.Grow(out, r.Count)[:n+r.Count]
			for i := n; i < len(out); i++ {
				out[i] = tok
			}
		}
		ranges = append(ranges, Range{Offset: start, Length: len(out) - start})
	}
	if len(ranges) != len(exps) {
		return nil, nil, fmt.Errorf("%w: the prompt has %d image markers for %d images", ErrPlacement, len(ranges), len(exps))
	}
	return out, ranges, nil
}

func expandedLen(exps []Expansion) int {
	n := 0
	for _, e := range exps {
		n += e.Tokens()
	}
	return n
}
