package tokenize

import "unicode"

// Character classes the pre-tokenizer patterns ask about, one bit each.
// Those of the Basic Multilingual Plane are precomputed: the unicode
// package's range tables cost a binary search per call, and CJK or
// Cyrillic text asks for every character.
const (
	classLetter   = 1 << iota // \p{L}
	classNumber               // \p{N}
	classSpace                // \s: the White_Space property, as Oniguruma has it
	classCased                // o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	classUncased              // o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	classMark                 // \p{M}
	classPunctSym             // [\p{P}\p{S}]
	classCJK                  // DeepSeek V3's [一-龥぀-ゟ゠-ヿ]
)

var bmpClass = func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for r := range rune(0x10000) {
		t[r] = computeClass(r)
	}
	return &t
}()

// computeClass is goClass, or for a character Go's tables do not have
// yet, the classes of the newer Unicode version that Oniguruma knows.
func computeClass(r rune) uint8 {
	if c := goClass(r); c != 0 {
		return c
	}
	return newerClass(r)
}

// classRange gives the characters first to last the classes bits.
type classRange struct {
	first, last rune
	bits        uint8
}

// newerClass returns r's classes from newerClasses, 0 if it has none.
func newerClass(r rune) uint8 {
	lo, hi := 0, len(newerClasses)
	for lo < hi {
		m := (lo + hi) / 2
		switch cr := newerClasses[m]; {
		case r < cr.first:
			hi = m
		case r > cr.last:
			lo = m + 1
		default:
			return cr.bits
		}
	}
	return 0
}

// goClass computes r's classes from Go's unicode tables.
func goClass(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= classLetter
	}
	if unicode.IsNumber(r) {
		c |= classNumber
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= classSpace
	}
	mark := unicode.IsMark(r)
	if mark {
		c |= classMark
	}
	both := mark || unicode.In(r, unicode.Lm, unicode.Lo)
	if both || unicode.In(r, unicode.Lu, unicode.Lt) {
		c |= classCased
	}
	if both || unicode.Is(unicode.Ll, r) {
		c |= classUncased
	}
	if unicode.IsPunct(r) || unicode.IsSymbol(r) {
		c |= classPunctSym
	}
	if r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x30FF {
		c |= classCJK
	}
	return c
}

// classOf returns r's class bits; none for -1 (the end of the text).
func classOf(r rune) uint8 {
	if r >= 0 && r < 0x10000 {
		return bmpClass[r]
	}
	if r < 0 {
		return 0
	}
	return computeClass(r)
}

func isLetter(r rune) bool {
	if r >= 0 && r < 0x10000 {
		return bmpClass[r]&classLetter != 0
	}
	return unicode.IsLetter(r) || newerClass(r)&classLetter != 0
}

func isNumber(r rune) bool {
	if r >= 0 && r < 0x10000 {
		return bmpClass[r]&classNumber != 0
	}
	return unicode.IsNumber(r) || newerClass(r)&classNumber != 0
}

// isSpace is \s in the Oniguruma Unicode sense: the White_Space property.
func isSpace(r rune) bool {
	if r >= 0 && r < 0x10000 {
		return bmpClass[r]&classSpace != 0
	}
	return unicode.Is(unicode.White_Space, r) || newerClass(r)&classSpace != 0
}
