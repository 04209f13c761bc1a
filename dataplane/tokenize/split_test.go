package tokenize

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCl100kASCIIPathIsNextAny: wherever nextASCII answers, it answers
// what the alternative-by-alternative matcher does, for both digit
// bounds, on random strings of the characters each branch turns on
// (ASCII letters, digits, punctuation, the apostrophe of contractions,
// spaces, tabs, newlines, and non-ASCII letters, digits, marks and
// spaces next to them). It fails if nextASCII is made to take a case it
// gets wrong (a space before punctuation, a letter after a non-ASCII one).
func TestCl100kASCIIPathIsNextAny(t *testing.T) {
	alphabet := []string{"a", "Z", "q", "7", "0", ",", ".", "?", "-", "'", "s", "t", "l", "re", " ", " ", "  ", "\t", "\n", "\r",
		"é", "日", "٣", "\u0301", "\u00a0", "\u3000", "¿"}
	rng := rand.New(rand.NewPCG(11, 12))
	taken := 0
	for _, c := range []cl100kSplitter{{maxDigits: 1}, {maxDigits: 3}} {
		for range 20000 {
			var b strings.Builder
			for range 1 + rng.IntN(10) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			for i := 0; i < len(s); i++ {
				if i > 0 && s[i]&0xC0 == 0x80 {
					continue // not a character's start
				}
				got, ok := c.nextASCII(s, i)
				if !ok {
					continue
				}
				taken++
				if want := c.nextAny(s, i); got != want {
					t.Fatalf("maxDigits %d, %q at %d: nextASCII ends at %d, nextAny at %d", c.maxDigits, s, i, got, want)
				}
			}
		}
	}
	if taken < 10000 {
		t.Fatalf("nextASCII answered only %d times", taken)
	}
}

// TestCl100kASCIIPathTakesEnglish holds the fast path's reach without a
// clock: on English prose it settles all but the pieces it leaves on
// purpose (the spaces before punctuation and digits, and contractions).
func TestCl100kASCIIPathTakesEnglish(t *testing.T) {
	c := cl100kSplitter{maxDigits: 1}
	pieces, fast := 0, 0
	for _, p := range shortPrompts {
		for i := 0; i < len(p.text); {
			e, ok := c.nextASCII(p.text, i)
			if ok {
				fast++
			}
			pieces++
			if want := c.nextAny(p.text, i); ok && e != want {
				t.Fatalf("%q at %d: nextASCII ends at %d, nextAny at %d", p.text, i, e, want)
			}
			i = c.next(p.text, i)
		}
	}
	if fast < pieces*9/10 {
		t.Fatalf("nextASCII settled %d of %d pieces, want 90%%", fast, pieces)
	}
}
