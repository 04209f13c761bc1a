package tokenize

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// AddedToken is a token matched whole in the input before any other step
// (special tokens such as <|im_start|>, and added words).
type AddedToken struct {
	ID         uint32
	Content    string
	Special    bool
	SingleWord bool
	LStrip     bool
	RStrip     bool
	Normalized bool
}

// addedMatcher finds added tokens in text, leftmost first and longest among
// those starting at the same place, as Hugging Face's matcher does.
type addedMatcher struct {
	byFirst [256][]*AddedToken // candidates by first byte, longest first
	any     bool
	// Where one first byte has many candidates (Gemma 3 has 6,322 tokens
	// that start with '<' and 31 runs of newlines), they are found by a
	// walk down a trie instead of thousands of prefix tests at every '<'
	// of the text; tries[f] is nil for the others.
	tries [256]*addedTrie
	// firsts are the distinct first bytes; with one (every Qwen and Llama
	// special token starts with '<') the scan is strings.IndexByte, which
	// runs at memory speed.
	firsts []byte
}

func newAddedMatcher(tokens []*AddedToken) *addedMatcher {
	m := &addedMatcher{}
	for _, t := range tokens {
		if t.Content == "" {
			continue
		}
		f := t.Content[0]
		m.byFirst[f] = append(m.byFirst[f], t)
		m.any = true
	}
	for f := range m.byFirst {
		if len(m.byFirst[f]) > 0 {
			m.firsts = append(m.firsts, byte(f))
		}
		sort.SliceStable(m.byFirst[f], func(a, b int) bool { return len(m.byFirst[f][a].Content) > len(m.byFirst[f][b].Content) })
		if len(m.byFirst[f]) > manyCandidates {
			m.tries[f] = newAddedTrie(m.byFirst[f])
		}
	}
	return m
}

// manyCandidates is the number of tokens with one first byte beyond which
// they are looked up in a trie.
const manyCandidates = 16

// find returns the next match at or after from: the span it covers (with
// lstrip/rstrip whitespace) and the token, or ok false.
func (m *addedMatcher) find(s string, from int) (start, end int, tok *AddedToken, ok bool) {
	if !m.any {
		return 0, 0, nil, false
	}
	for i := from; i < len(s); i++ {
		if len(m.firsts) == 1 {
			k := strings.IndexByte(s[i:], m.firsts[0])
			if k < 0 {
				break
			}
			i += k
		}
		if tr := m.tries[s[i]]; tr != nil {
			// The longest token spelled from i on, then shorter ones.
			for n := tr.deepest(s[i:]); n > 0; n = tr.nodes[n].parent {
				for _, t := range tr.nodes[n].tokens {
					if st, e, ok := accept(s, from, i, t); ok {
						return st, e, t, true
					}
				}
			}
			continue
		}
		for _, t := range m.byFirst[s[i]] {
			if !strings.HasPrefix(s[i:], t.Content) {
				continue
			}
			if st, e, ok := accept(s, from, i, t); ok {
				return st, e, t, true
			}
		}
	}
	return 0, 0, nil, false
}

// accept says whether t, found at i, matches there (single_word), and
// returns the span it covers with lstrip/rstrip whitespace.
func accept(s string, from, i int, t *AddedToken) (start, end int, ok bool) {
	e := i + len(t.Content)
	if t.SingleWord && (isWordBefore(s, i) || isWordAt(s, e)) {
		return 0, 0, false
	}
	st := i
	if t.LStrip {
		for st > from {
			r, n := utf8.DecodeLastRuneInString(s[:st])
			if !isSpace(r) {
				break
			}
			st -= n
		}
	}
	if t.RStrip {
		for e < len(s) {
			r, n := utf8.DecodeRuneInString(s[e:])
			if !isSpace(r) {
				break
			}
			e += n
		}
	}
	return st, e, true
}

func isWordRune(r rune) bool { return r == '_' || isLetter(r) || isNumber(r) }

func isWordBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isWordRune(r)
}

func isWordAt(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r)
}
