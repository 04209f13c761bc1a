package tokenize

import (
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// normalizeCases mix what stableLen passes over (ASCII, CJK ideographs) with
// what it must not: combining marks after a skipped character, kana and
// their voicing marks, Hangul jamo, compatibility ideographs (U+F900 and
// on decompose), fullwidth forms (NFKC folds them), and broken UTF-8.
func normalizeCases(rng *rand.Rand, n int) []string {
	parts := []string{"a", "e", " ", "\n", "中", "国", "㐀", "鿿", "\u0301", "\u0308", "か", "\u3099", "ﾞ",
		"\u1100", "\u1161", "\u11a8", "가", "豈", "ｆ", "①", "ˠ", "\xe4\xb8", "\xe3\x8f\xbf", "\xff", "\xf6", "é", "e\u0301"}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		out[i] = b.String()
	}
	return out
}

func checkNormalize(t *testing.T, s string) {
	t.Helper()
	for _, f := range []norm.Form{norm.NFC, norm.NFKC, norm.NFD, norm.NFKD} {
		u := unicodeForm{form: f, composing: f == norm.NFC || f == norm.NFKC}
		if got, want := u.normalize(s, nil), f.String(s); got != want {
			t.Fatalf("form %d of %q: %q, want %q", f, s, got, want)
		}
	}
}

func TestNormalizeMatchesNorm(t *testing.T) {
	for _, s := range normalizeCases(rand.New(rand.NewPCG(7, 8)), 20000) {
		checkNormalize(t, s)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range normalizeCases(rand.New(rand.NewPCG(9, 10)), 30) {
		f.Add(s)
	}
	f.Fuzz(checkNormalize)
}
