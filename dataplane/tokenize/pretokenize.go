package tokenize

import (
	"strings"
	"unicode/utf8"
)

// hasByteLevel says whether a pre-tokenizer is or holds ByteLevel: then
// every piece BPE sees is spelled in the byte alphabet and the model runs
// on bytes; without it on characters (SentencePiece style).
func hasByteLevel(c *componentJSON) bool {
	if c == nil {
		return false
	}
	if c.Type == "ByteLevel" {
		return true
	}
	for _, sub := range c.PreTokenizers {
		if hasByteLevel(sub) {
			return true
		}
	}
	return false
}

func (t *Tokenizer) setPreTokenizer(c *componentJSON) error {
	if c == nil {
		return nil
	}
	if t.meta != nil {
		return unsupported("pre-tokenizer %q after Metaspace (Metaspace must come last)", c.Type)
	}
	switch c.Type {
	case "Sequence":
		for _, sub := range c.PreTokenizers {
			if err := t.setPreTokenizer(sub); err != nil {
				return err
			}
		}
		return nil
	case "Split":
		return t.addSplit(c)
	case "ByteLevel":
		t.prefixSpace = c.AddPrefixSpace != nil && *c.AddPrefixSpace
		if c.UseRegex == nil || *c.UseRegex {
			t.splitters = append(t.splitters, gpt2Splitter{})
		}
		return nil
	case "Metaspace":
		m, err := newMetaspace(c)
		if err != nil {
			return err
		}
		t.meta = m
		return nil
	}
	return unsupported("pre-tokenizer %q", c.Type)
}

func (t *Tokenizer) addSplit(c *componentJSON) error {
	if c.Invert {
		return unsupported("Split pre-tokenizer with invert")
	}
	if c.Pattern != nil && c.Pattern.String != nil {
		sp, err := newLiteralSplitter(*c.Pattern.String, c.Behavior)
		if err != nil {
			return err
		}
		t.splitters = append(t.splitters, sp)
		return nil
	}
	if c.Behavior != "Isolated" {
		return unsupported("Split pre-tokenizer behavior %q with a Regex (only Isolated)", c.Behavior)
	}
	if c.Pattern == nil || c.Pattern.Regex == nil {
		return unsupported("Split pre-tokenizer without a pattern")
	}
	sp, ok := newSplitter(*c.Pattern.Regex)
	if !ok {
		return unsupported("Split regex %q (lookaround, and not one of the GPT-4, o200k or DeepSeek V3 patterns)", *c.Pattern.Regex)
	}
	t.splitters = append(t.splitters, sp)
	return nil
}

// literalSplitter is Split with a String pattern, in the behaviours of
// tokenizers' NormalizedString::split (src/tokenizer/normalizer.rs,
// 3ba8ad0): for "The-final--countdown" split at "-", Isolated gives
// The|-|final|-|-|countdown, MergedWithPrevious The-|final-|-|countdown,
// MergedWithNext The|-final|-|-countdown, Contiguous The|-|final|--|countdown.
// Removed drops the matches, which a splitter that returns where each
// piece ends cannot express; it is refused.
type literalSplitter struct {
	pat      string
	behavior splitBehavior
}

type splitBehavior uint8

const (
	splitIsolated splitBehavior = iota
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

func newLiteralSplitter(pat, behavior string) (splitter, error) {
	if pat == "" {
		return nil, unsupported("Split pre-tokenizer with an empty String pattern")
	}
	b, ok := map[string]splitBehavior{"Isolated": splitIsolated, "MergedWithPrevious": splitMergedWithPrevious,
		"MergedWithNext": splitMergedWithNext, "Contiguous": splitContiguous}[behavior]
	if !ok {
		return nil, unsupported("Split pre-tokenizer behavior %q", behavior)
	}
	return literalSplitter{pat: pat, behavior: b}, nil
}

func (l literalSplitter) next(s string, i int) int {
	rest := s[i:]
	atMatch := strings.HasPrefix(rest, l.pat)
	switch l.behavior {
	case splitIsolated:
		if atMatch {
			return i + len(l.pat)
		}
	case splitContiguous:
		if atMatch {
			j := i + len(l.pat)
			for strings.HasPrefix(s[j:], l.pat) {
				j += len(l.pat)
			}
			return j
		}
	case splitMergedWithPrevious:
		if k := strings.Index(rest, l.pat); k >= 0 {
			return i + k + len(l.pat)
		}
		return len(s)
	case splitMergedWithNext:
		j := i
		if atMatch {
			j += len(l.pat)
		}
		if k := strings.Index(s[j:], l.pat); k >= 0 {
			return j + k
		}
		return len(s)
	}
	if k := strings.Index(rest, l.pat); k >= 0 {
		return i + k
	}
	return len(s)
}

// metaspace is tokenizers' Metaspace pre-tokenizer
// (src/pre_tokenizers/metaspace.rs, 3ba8ad0): spaces become the
// replacement character (U+2581), which is put before the piece (always,
// or only before the piece at the very start of the input: "first"),
// and with split the piece is cut before every replacement character.
type metaspace struct {
	repl    string
	prepend prependScheme
	split   bool
}

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

func newMetaspace(c *componentJSON) (*metaspace, error) {
	m := &metaspace{repl: "\u2581", prepend: prependAlways, split: c.Split == nil || *c.Split}
	if c.Replacement != nil {
		if utf8.RuneCountInString(*c.Replacement) != 1 {
			return nil, unsupported("Metaspace replacement %q (one character)", *c.Replacement)
		}
		m.repl = *c.Replacement
	}
	if c.PrependScheme != nil {
		p, ok := map[string]prependScheme{"always": prependAlways, "first": prependFirst, "never": prependNever}[*c.PrependScheme]
		if !ok {
			return nil, unsupported("Metaspace prepend_scheme %q", *c.PrependScheme)
		}
		m.prepend = p
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace && m.prepend != prependNever {
		return nil, unsupported("Metaspace add_prefix_space false without prepend_scheme \"never\" (tokenizers refuses it)")
	}
	return m, nil
}

// rewrite returns piece with spaces replaced and the replacement put
// before it as the scheme says; atStart: the piece begins the input.
func (m *metaspace) rewrite(piece string, atStart bool, a *textArena) string {
	add := !strings.HasPrefix(piece, m.repl) && !strings.HasPrefix(piece, " ") &&
		(m.prepend == prependAlways || m.prepend == prependFirst && atStart)
	spaces := strings.Count(piece, " ")
	if spaces == 0 && !add {
		return piece
	}
	b := a.preBuf(len(piece) + (spaces+1)*len(m.repl))
	if add {
		b = append(b, m.repl...)
	}
	if spaces > 0 {
		b = appendReplaced(b, piece, " ", m.repl, strings.IndexByte(piece, ' '))
	} else {
		b = append(b, piece...)
	}
	return a.keepPre(b)
}

// nextWord returns the end of the word starting at i: it runs up to the
// next replacement character after the first (MergedWithNext).
func (m *metaspace) nextWord(s string, i int) int {
	j := i
	if strings.HasPrefix(s[i:], m.repl) {
		j += len(m.repl)
	}
	if k := strings.Index(s[j:], m.repl); k >= 0 {
		return j + k
	}
	return len(s)
}
