package tokenize

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// splitter cuts normalized text into pre-tokens. Each call to next returns
// the end of the piece starting at i.
type splitter interface {
	next(s string, i int) int
}

// The regular expressions of the GPT-4 family (cl100k, Qwen2/2.5/3, Llama 3),
// o200k's (gpt-oss, split_o200k.go) and DeepSeek V3's (split_deepseek.go)
// need lookahead, which Go's RE2 does not have; they are implemented by hand,
// alternative by alternative, as a backtracking engine (Oniguruma, which
// tokenizers uses) tries them, and chosen by exact pattern text.
const (
	// patternQwen2 is Qwen2/2.5/3's: digits one at a time.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternCL100K is cl100k's and Llama 3's: digits in runs of up to three.
	patternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is the ByteLevel pre-tokenizer's own (use_regex: true).
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// patternSpelling spells a carriage return or line feed written into a
// pattern as itself the way the known patterns write it (DeepSeek V3's
// tokenizer.json has both spellings).
var patternSpelling = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// newSplitter returns the splitter for a Split pattern, or false if the
// pattern is neither one of the known lookahead patterns nor valid RE2.
func newSplitter(pattern string) (splitter, bool) {
	switch patternSpelling.Replace(pattern) {
	case patternQwen2:
		return cl100kSplitter{maxDigits: 1}, true
	case patternCL100K:
		return cl100kSplitter{maxDigits: 3}, true
	case patternGPT2:
		return gpt2Splitter{}, true
	case patternO200K:
		return o200kSplitter{}, true
	case patternDeepSeekDigits:
		return classRunSplitter{class: classNumber, max: 3}, true
	case patternDeepSeekCJK:
		return classRunSplitter{class: classCJK}, true
	case patternDeepSeekWords:
		return deepseekSplitter{}, true
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, false
	}
	return &regexpSplitter{re: re}, true
}

// letterRun returns the end of the run of letters starting at j, with a
// byte loop for ASCII letters.
func letterRun(s string, j int) int {
	for j < len(s) {
		if c := s[j]; c < utf8.RuneSelf {
			if bmpClass[c]&classLetter == 0 {
				return j
			}
			j++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		if !isLetter(r) {
			return j
		}
		j += n
	}
	return j
}

func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) (or case-sensitively) at i.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(j int) (rune, int) {
		r, n := at(s, j)
		if fold {
			if r == 'ſ' { // U+017F folds to s under Unicode case-insensitivity
				return 's', n
			}
			if r < utf8.RuneSelf && r >= 'A' && r <= 'Z' {
				r += 'a' - 'A'
			}
		}
		return r, n
	}
	r1, n1 := lower(i + 1)
	switch r1 {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v', 'l':
		r2, n2 := lower(i + 1 + n1)
		if (r1 == 'r' && r2 == 'e') || (r1 == 'v' && r2 == 'e') || (r1 == 'l' && r2 == 'l') {
			return 1 + n1 + n2
		}
	}
	return 0
}

// spaceRun returns the end of the whitespace run starting at i.
func spaceRun(s string, i int) int {
	for i < len(s) {
		r, n := at(s, i)
		if !isSpace(r) {
			break
		}
		i += n
	}
	return i
}

// cl100kSplitter implements patternQwen2 (maxDigits 1) and patternCL100K (3).
type cl100kSplitter struct{ maxDigits int }

func (c cl100kSplitter) next(s string, i int) int {
	if e, ok := c.nextASCII(s, i); ok {
		return e
	}
	return c.nextAny(s, i)
}

// nextAny is next for any text: the pattern's alternatives in their order.
func (c cl100kSplitter) nextAny(s string, i int) int {
	if n := contraction(s, i, true); n > 0 {
		return i + n
	}
	r, n := at(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isLetter(r) || (r != '\r' && r != '\n' && !isNumber(r)) {
		j := i
		if !isLetter(r) {
			if r2, _ := at(s, i+n); isLetter(r2) {
				j = i + n
			}
		}
		if r2, _ := at(s, j); isLetter(r2) {
			return letterRun(s, j)
		}
	}
	// \p{N}{1,k}
	if isNumber(r) {
		return numberRun(s, i+n, c.maxDigits-1)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if j := punctRun(s, i, true); j > i {
		return newlineRun(s, j)
	}
	return spaceAlternatives(s, i)
}

// nextASCII is next where an ASCII character at i (and the one after it,
// when that decides) settles which alternative matches, as it does for
// most pieces of most text: a word, a word after a space or a punctuation
// mark, a digit, punctuation. ok is false for the rest (contractions,
// spaces, non-ASCII text), which nextAny matches alternative by
// alternative; TestCl100kASCIIPathIsNextAny holds the two equal.
func (c cl100kSplitter) nextASCII(s string, i int) (end int, ok bool) {
	ch := s[i]
	if ch >= utf8.RuneSelf || ch == '\'' {
		return 0, false
	}
	switch cl := bmpClass[ch]; {
	case cl&classLetter != 0: // \p{L}+
		return letterRun(s, i+1), true
	case cl&classNumber != 0: // \p{N}{1,k}
		return numberRun(s, i+1, c.maxDigits-1), true
	case ch == '\r' || ch == '\n':
		return 0, false
	}
	// [^\r\n\p{L}\p{N}] then \p{L}+, or else (not a space) the punctuation run.
	if i+1 < len(s) {
		next := s[i+1]
		if next >= utf8.RuneSelf {
			return 0, false
		}
		if bmpClass[next]&classLetter != 0 {
			return letterRun(s, i+2), true
		}
	}
	if bmpClass[ch]&classSpace != 0 {
		return 0, false
	}
	return newlineRun(s, punctRun(s, i, false)), true
}

// newlineRun returns the end of the run of \r and \n from j ([\r\n]*).
func newlineRun(s string, j int) int {
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// numberRun returns the end of up to more further numbers from j
// (\p{N}{1,k} after its first).
func numberRun(s string, j, more int) int {
	for ; more > 0 && j < len(s); more-- {
		r, n := at(s, j)
		if !isNumber(r) {
			break
		}
		j += n
	}
	return j
}

// spaceAlternatives matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, where the
// text has a space: up to and including the last newline of the run of
// spaces, else as spaceTail says.
func spaceAlternatives(s string, i int) int {
	end := spaceRun(s, i)
	last := -1
	for j := i; j < end; j++ {
		if s[j] == '\r' || s[j] == '\n' {
			last = j
		}
	}
	if last >= 0 {
		return last + 1
	}
	return spaceTail(s, i, end)
}

// punctRun matches ' ?[^\s\p{L}\p{N}]+' at i (the space optional when
// leadingSpace) and returns its end, or i.
func punctRun(s string, i int, leadingSpace bool) int {
	j := i
	if leadingSpace && j < len(s) && s[j] == ' ' {
		j++
	}
	start := j
	for j < len(s) {
		r, n := at(s, j)
		if isSpace(r) || isLetter(r) || isNumber(r) {
			break
		}
		j += n
	}
	if j == start {
		return i
	}
	return j
}

// spaceTail implements \s+(?!\S)|\s+ for the run [i, end): all of it at the
// end of the text or before more space, else all but its last character,
// which then joins the next piece; a single space stays alone.
func spaceTail(s string, i, end int) int {
	if end >= len(s) {
		return end
	}
	_, lastLen := utf8.DecodeLastRuneInString(s[i:end])
	if end-lastLen > i {
		return end - lastLen
	}
	return end
}

// gpt2Splitter implements patternGPT2.
type gpt2Splitter struct{}

func (gpt2Splitter) next(s string, i int) int {
	if n := contraction(s, i, false); n > 0 {
		return i + n
	}
	j := i
	if s[j] == ' ' {
		j++
	}
	r, _ := at(s, j)
	switch {
	case isLetter(r):
		return letterRun(s, j)
	case isNumber(r):
		for j < len(s) {
			r2, n2 := at(s, j)
			if !isNumber(r2) {
				break
			}
			j += n2
		}
		return j
	}
	if k := punctRun(s, i, true); k > i {
		return k
	}
	return spaceTail(s, i, spaceRun(s, i))
}

// regexpSplitter splits on an RE2 pattern (Isolated behaviour): matches and
// the text between them are pieces.
type regexpSplitter struct{ re *regexp.Regexp }

func (r *regexpSplitter) next(s string, i int) int {
	loc := r.re.FindStringIndex(s[i:])
	switch {
	case loc == nil:
		return len(s)
	case loc[0] > 0:
		return i + loc[0] // the gap before the next match
	case loc[1] == 0:
		_, n := at(s, i) // an empty match: move on by one character
		return i + n
	}
	return i + loc[1]
}
