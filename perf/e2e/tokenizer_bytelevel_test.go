//go:build e2e

package e2e

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// byteLevelToken spells byte b as ByteLevel does (GPT-2's bytes_to_unicode:
// printable Latin-1 stands for itself, the other bytes for U+0100 onwards
// in order).
func byteLevelToken(b byte) string {
	printable := func(c int) bool { return c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF }
	if printable(int(b)) {
		return string(rune(b))
	}
	n := 0
	for c := range int(b) {
		if !printable(c) {
			n++
		}
	}
	return string(rune(0x100 + n))
}

// patternAlphabet is drawn from to make strings that walk every branch of
// the pre-tokenizer patterns: cased and uncased letters and the letters in
// both classes (Lt, Lm, Lo), marks of the three kinds, numbers of the
// three kinds, contractions and U+017F (which folds to s), ASCII and other
// punctuation and symbols, every kind of space and newline, format and
// control characters, CJK inside and just outside DeepSeek V3's ranges,
// and characters of Unicode 15.1 and 16.0, which Go's tables lack.
var patternAlphabet = strings.Fields(`A b Z s S t T d D l L m r e v V x Hello WORLD ǅ ᾈ ʰ ー 々 中 文 あ ア ก א 𠀋 龥 龦 㐀 ſ K
	1 2 9 ٣ ² Ⅻ 𝟘 123 𐵐 𐵰 𐵀 𮯰 Ᲊ ᲊ 𞗐 ' ' ' ’ . , ! / // - $ + < ( " @ _ ~ 。 ， € 😀 🦙 © ? :`)

// patternExtra are characters strings.Fields cannot carry.
var patternExtra = []string{" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085",
	"\v", "\f", "\u0001", "\u200d", "\ufeff", "\u00ad", "\u0301", "\u0903", "\u20dd", "\u093f", "\u0897", "'s", "'T", "'ll", "'RE", "`"}

// randomPatternTexts returns n strings of 1 to 16 draws from the alphabets.
func randomPatternTexts(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 21))
	all := append(append([]string{}, patternAlphabet...), patternExtra...)
	texts := make([]string, n)
	for i := range texts {
		var b strings.Builder
		for range 1 + rng.IntN(16) {
			b.WriteString(all[rng.IntN(len(all))])
		}
		texts[i] = b.String()
	}
	return texts
}

// TestByteLevelFamiliesRandom: on thousands of random strings made to
// exercise o200k's and DeepSeek V3's patterns branch by branch, kvgate's
// ids equal Hugging Face's. The seed is new each run (logged; set
// KVGATE_PATTERN_SEED to repeat one).
func TestByteLevelFamiliesRandom(t *testing.T) {
	requireTokenizerPackages(t)
	seed := rand.Uint64()
	if s := os.Getenv("KVGATE_PATTERN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (KVGATE_PATTERN_SEED)", seed)
	texts := randomPatternTexts(seed, 4000)
	for _, fam := range tokenizerFamilies {
		if !fam.byteLevel {
			continue
		}
		t.Run(fam.name, func(t *testing.T) {
			tj, tok := loadFamily(t, fam.pkg, nil)
			req := &hfRequest{JSON: string(tj)}
			for _, s := range texts {
				req.Encode = append(req.Encode, hfEncode{Text: s})
			}
			ref := runHF(t, req)
			bad := 0
			for i, s := range texts {
				if got := tok.Encode(nil, s, false); !slices.Equal(got, ref.Encode[i]) {
					if bad++; bad <= 20 {
						t.Errorf("encode %q:\n got %v\nwant %v", s, got, ref.Encode[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ", bad, len(texts))
			}
		})
	}
}

// dropMerges removes every nth merge of a BPE model.
func dropMerges(m map[string]any, nth int) {
	model := m["model"].(map[string]any)
	merges := model["merges"].([]any)
	kept := merges[:0]
	for i, mg := range merges {
		if i%nth != nth-1 {
			kept = append(kept, mg)
		}
	}
	model["merges"] = kept
}
