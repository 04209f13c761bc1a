package tokenize

// patternO200K is o200k's (gpt-oss): letter runs split by case, so that
// "HelloWorld" is Hello|World, with a contraction kept on the word; digits
// in runs of up to three; a punctuation run takes following newlines and
// slashes. Its alternatives, in order:
//
//  1. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  2. [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//  3. \p{N}{1,3}
//  4. ?[^\s\p{L}\p{N}]+[\r\n/]*
//  5. \s*[\r\n]+   6. \s+(?!\S)   7. \s+
//
// Every character starts a match of one of them, so the pieces are the
// matches, one after another. Call the first class "cased" and the second
// "uncased"; Lm, Lo and marks are in both.
const patternO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// o200kSplitter implements patternO200K. A backtracking engine tries
// alternative 1 with the optional leading character, then without it,
// then alternative 2 the same way; the order matters for a mark, which is
// both a possible leading character and a cased and uncased one.
type o200kSplitter struct{}

func (o200kSplitter) next(s string, i int) int {
	r, n := at(s, i)
	c := classOf(r)
	lead := r != '\r' && r != '\n' && c&(classLetter|classNumber) == 0
	if lead {
		if e := o200kLowerWord(s, i+n); e >= 0 {
			return e
		}
	}
	if e := o200kLowerWord(s, i); e >= 0 {
		return e
	}
	if lead {
		if e := o200kUpperWord(s, i+n); e >= 0 {
			return e
		}
	}
	if e := o200kUpperWord(s, i); e >= 0 {
		return e
	}
	if c&classNumber != 0 {
		return numberRun(s, i+n, 2)
	}
	if j := punctRun(s, i, true); j > i {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
			j++
		}
		return j
	}
	return spaceAlternatives(s, i)
}

// classRun returns the end of the run of characters in class from j.
func classRun(s string, j int, class uint8) int {
	for j < len(s) {
		r, n := at(s, j)
		if classOf(r)&class == 0 {
			break
		}
		j += n
	}
	return j
}

// o200kLowerWord matches alternative 1 without its leading character at
// j: cased*, uncased+, a contraction. The greedy cased* gives back
// characters until an uncased one can follow, so the match ends after the
// uncased run that follows the cased run, or else after the last uncased
// character inside the cased run; -1 if there is none.
func o200kLowerWord(s string, j int) int {
	end := -1
	k := j
	for k < len(s) {
		r, n := at(s, k)
		c := classOf(r)
		if c&classCased == 0 {
			break
		}
		k += n
		if c&classUncased != 0 {
			end = k
		}
	}
	if r, _ := at(s, k); classOf(r)&classUncased != 0 {
		end = classRun(s, k, classUncased)
	}
	if end < 0 {
		return -1
	}
	return end + contraction(s, end, true)
}

// o200kUpperWord matches alternative 2 without its leading character at
// j: cased+, uncased*, a contraction; -1 if j is not cased.
func o200kUpperWord(s string, j int) int {
	e := classRun(s, j, classCased)
	if e == j {
		return -1
	}
	e = classRun(s, e, classUncased)
	return e + contraction(s, e, true)
}
