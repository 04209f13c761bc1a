package tokenize

import (
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// TestPreTokenizeGolden: o200k's (gpt-oss) and DeepSeek V3's pre-tokenizers
// cut 3000 random strings, drawn to walk every branch of their patterns,
// where Hugging Face's (Oniguruma's regexes) does
// (testdata/families/*/pretokenize.json, from gen/gen_families.mjs).
func TestPreTokenizeGolden(t *testing.T) {
	for _, name := range []string{"gptoss", "deepseek_v3"} {
		t.Run(name, func(t *testing.T) {
			var g struct {
				Normalizer   *componentJSON `json:"normalizer"`
				PreTokenizer *componentJSON `json:"pre_tokenizer"`
				Cases        []struct {
					Text string `json:"text"`
					Ends []int  `json:"ends"` // in characters
				} `json:"cases"`
			}
			readJSON(t, filepath.Join("testdata", "families", name, "pretokenize.json"), &g)
			tok := &Tokenizer{}
			var err error
			if tok.norm, err = newNormalizer(g.Normalizer); err != nil {
				t.Fatal(err)
			}
			if err := tok.setPreTokenizer(g.PreTokenizer); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for _, c := range g.Cases {
				var want []int
				for _, e := range c.Ends {
					want = append(want, byteOffset(c.Text, e))
				}
				if got := tok.preTokenEnds(c.Text); !slices.Equal(got, want) {
					if bad++; bad <= 10 {
						t.Errorf("%q: pieces end at bytes %v, want %v", c.Text, got, want)
					}
				}
			}
			if len(g.Cases) < 1000 || bad > 0 {
				t.Fatalf("%d of %d cases differ", bad, len(g.Cases))
			}
		})
	}
}

// preTokenEnds returns where each piece of s ends (normalizing and added
// tokens aside: the golden strings hold none).
func (t *Tokenizer) preTokenEnds(s string) []int {
	var ends []int
	var walk func(piece string, at, stage int)
	walk = func(piece string, at, stage int) {
		if stage == len(t.splitters) {
			if piece != "" {
				ends = append(ends, at+len(piece))
			}
			return
		}
		for i := 0; i < len(piece); {
			e := t.splitters[stage].next(piece, i)
			walk(piece[i:e], at+i, stage+1)
			i = e
		}
	}
	walk(s, 0, 0)
	return ends
}

// byteOffset converts an offset in characters to one in bytes.
func byteOffset(s string, chars int) int {
	i := 0
	for ; chars > 0 && i < len(s); chars-- {
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return i
}

// FuzzPreTokenize: o200k's and DeepSeek V3's splitters cut any text into
// non-empty pieces that cover it, and the byte-level excerpts decode what
// they encode back to the text (invalid UTF-8 replaced).
func FuzzPreTokenize(f *testing.F) {
	var corpus []corpusItem
	readJSON(f, "testdata/corpus.json", &corpus)
	for _, c := range corpus {
		f.Add(c.input(f))
	}
	f.Add("HelloWorld don't\u0301AB ſ'S\r\n//x 123456 中文カナ\u200d1a")
	var toks []*Tokenizer
	for _, name := range []string{"gptoss", "deepseek_v3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", name))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			valid := toValidUTF8(s)
			for _, sp := range tok.splitters {
				for i := 0; i < len(valid); {
					e := sp.next(valid, i)
					if e <= i || e > len(valid) {
						t.Fatalf("%T.next(%q, %d) = %d", sp, valid, i, e)
					}
					i = e
				}
			}
			if got := tok.DecodeString(tok.Encode(nil, s, false), false); got != valid {
				t.Fatalf("round trip of %q gave %q", s, got)
			}
		}
	})
}
