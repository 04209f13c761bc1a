package tokenize

// DeepSeek V3 pre-tokenizes with a Sequence of three Split patterns, each
// applied to the pieces of the one before, then ByteLevel without its own
// pattern: numbers in groups of up to three, runs of CJK ideographs and
// kana, then patternDeepSeekWords. The first two are plain runs of one
// class of characters (classRunSplitter); the third has a lookahead.
const (
	patternDeepSeekDigits = `\p{N}{1,3}`
	patternDeepSeekCJK    = `[一-龥぀-ゟ゠-ヿ]+`
	// patternDeepSeekWords' alternatives, in order:
	//	1. an ASCII punctuation character and the ASCII letters after it
	//	2. [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
	//	3.  ?[\p{P}\p{S}]+[\r\n]*
	//	4. \s*[\r\n]+   5. \s+(?!\S)   6. \s+
	// Unlike o200k's, not every character starts a match (a digit, a
	// control or format character on its own); the text up to the next
	// match is a piece of its own, as Split's Isolated behaviour makes it.
	patternDeepSeekWords = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// classRunSplitter splits on a pattern that is one character class
// repeated: runs of the class (of at most max characters, 0 for no
// limit) and the text between them.
type classRunSplitter struct {
	class uint8
	max   int
}

func (c classRunSplitter) next(s string, i int) int {
	r, n := at(s, i)
	if classOf(r)&c.class == 0 {
		for j := i + n; j < len(s); {
			r, n := at(s, j)
			if classOf(r)&c.class != 0 {
				return j
			}
			j += n
		}
		return len(s)
	}
	j := i + n
	for more := c.max - 1; (c.max == 0 || more > 0) && j < len(s); more-- {
		r, n := at(s, j)
		if classOf(r)&c.class == 0 {
			break
		}
		j += n
	}
	return j
}

// deepseekSplitter implements patternDeepSeekWords.
type deepseekSplitter struct{}

func (deepseekSplitter) next(s string, i int) int {
	if e := deepseekMatch(s, i); e >= 0 {
		return e
	}
	for j := i; j < len(s); {
		_, n := at(s, j)
		j += n
		if j < len(s) && deepseekMatch(s, j) >= 0 {
			return j
		}
	}
	return len(s)
}

// deepseekMatch returns the end of the match of patternDeepSeekWords that
// starts at i, or -1 if none does.
func deepseekMatch(s string, i int) int {
	r, n := at(s, i)
	c := classOf(r)
	if r < 0x80 && c&classPunctSym != 0 && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	if r != '\r' && r != '\n' && c&(classLetter|classPunctSym) == 0 {
		if r2, _ := at(s, i+n); classOf(r2)&(classLetter|classMark) != 0 {
			return classRun(s, i+n, classLetter|classMark)
		}
	}
	if c&(classLetter|classMark) != 0 {
		return classRun(s, i, classLetter|classMark)
	}
	j := i
	if r == ' ' {
		j++
	}
	if r2, _ := at(s, j); classOf(r2)&classPunctSym != 0 {
		j = classRun(s, j, classPunctSym)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if c&classSpace != 0 {
		return spaceAlternatives(s, i)
	}
	return -1
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }
