package tokenize

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type familyGolden struct {
	Licence string `json:"licence"`
	Encode  []struct {
		Text       string   `json:"text"`
		AddSpecial bool     `json:"addSpecial"`
		IDs        []uint32 `json:"ids"`
	} `json:"encode"`
	Decode []struct {
		IDs  []uint32 `json:"ids"`
		Skip bool     `json:"skip"`
		Text string   `json:"text"`
	} `json:"decode"`
	Chat []struct {
		Name  string   `json:"name"`
		Text  *string  `json:"text"`
		Error string   `json:"error"`
		IDs   []uint32 `json:"ids"`
	} `json:"chat"`
}

// TestFamilyGolden compares with the ids and text Hugging Face's Rust
// tokenizers gives with Llama 2's, Gemma 3's, gpt-oss's and DeepSeek V3's
// real tokenizers, on the excerpts of them in testdata/families
// (gen/gen_families.mjs; the full files are compared in perf/e2e's
// TestTokenizerFamilies).
func TestFamilyGolden(t *testing.T) {
	for _, name := range []string{"llama2", "gemma3", "gptoss", "deepseek_v3"} {
		t.Run(name, func(t *testing.T) {
			tok, err := LoadDir(filepath.Join("testdata", "families", name))
			if err != nil {
				t.Fatal(err)
			}
			var g familyGolden
			readJSON(t, filepath.Join("testdata", "families", name, "golden.json"), &g)
			for _, e := range g.Encode {
				if got := tok.Encode(nil, e.Text, e.AddSpecial); !slices.Equal(got, e.IDs) {
					t.Errorf("encode %q (special %v)\n got %v\nwant %v", e.Text, e.AddSpecial, got, e.IDs)
				}
			}
			for _, d := range g.Decode {
				if got := tok.DecodeString(d.IDs, d.Skip); got != d.Text {
					t.Errorf("decode %v (skip %v)\n got %q\nwant %q", d.IDs, d.Skip, got, d.Text)
				}
			}
		})
	}
}

// spTokenizer builds a small SentencePiece-style tokenizer.json: a few
// characters and words, all byte tokens, <unk>, and components given by
// the caller (by default Llama 2's).
func spTokenizer(t testing.TB, mod func(m map[string]any)) *Tokenizer {
	t.Helper()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := range 256 {
		vocab[hexByteToken(byte(b))] = len(vocab)
	}
	for _, s := range []string{"▁", "a", "b", "c", "h", "i", "▁h", "▁hi", "ab", "abc", "▁a", " "} {
		vocab[s] = len(vocab)
	}
	m := map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "<unk>", "special": true},
			map[string]any{"id": 1, "content": "<s>", "special": true},
			map[string]any{"id": 2, "content": "</s>", "special": true}},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
			"merges": []string{"▁ h", "▁h i", "a b", "ab c", "▁ a"}},
	}
	if mod != nil {
		mod(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func hexByteToken(b byte) string {
	const digits = "0123456789ABCDEF"
	return "<0x" + string(digits[b>>4]) + string(digits[b&15]) + ">"
}

func (t *Tokenizer) ids(tb testing.TB, tokens ...string) []uint32 {
	tb.Helper()
	var out []uint32
	for _, s := range tokens {
		id, ok := t.vocab.get(s)
		if !ok {
			tb.Fatalf("no token %q", s)
		}
		out = append(out, id)
	}
	return out
}

// TestSentencePieceBPE covers merge_word's first symbols: characters,
// byte fallback, and fused unknowns when byte fallback is off.
func TestSentencePieceBPE(t *testing.T) {
	tok := spTokenizer(t, nil)
	for _, c := range []struct {
		text string
		want []string
	}{
		{"hi abc", []string{"▁hi", "▁", "abc"}}, // "a b" ranks before "▁ a"
		{"hi ac", []string{"▁hi", "▁a", "c"}},
		{"abcé", []string{"▁", "abc", "<0xC3>", "<0xA9>"}},
		{"<s>hi</s>", []string{"<s>", "▁hi", "</s>"}}, // Prepend applies to each segment
	} {
		if got, want := tok.Encode(nil, c.text, false), tok.ids(t, c.want...); !slices.Equal(got, want) {
			t.Errorf("%q: got %v want %v", c.text, got, want)
		}
	}
	noFallback := spTokenizer(t, func(m map[string]any) { m["model"].(map[string]any)["byte_fallback"] = false })
	if got, want := noFallback.Encode(nil, "aéé€b", false), noFallback.ids(t, "▁a", "<unk>", "b"); !slices.Equal(got, want) {
		t.Errorf("fused unknowns: got %v want %v", got, want)
	}
	unfused := spTokenizer(t, func(m map[string]any) {
		m["model"].(map[string]any)["byte_fallback"] = false
		m["model"].(map[string]any)["fuse_unk"] = false
	})
	if got, want := unfused.Encode(nil, "aéé", false), unfused.ids(t, "▁a", "<unk>", "<unk>"); !slices.Equal(got, want) {
		t.Errorf("unfused unknowns: got %v want %v", got, want)
	}
}

// TestSentencePieceDecode: Replace, ByteFallback (a run that is not
// UTF-8 is one U+FFFD per byte), Fuse and Strip; and Metaspace's decoder.
func TestSentencePieceDecode(t *testing.T) {
	tok := spTokenizer(t, nil)
	for _, c := range []struct {
		tokens []string
		want   string
	}{
		{[]string{"▁hi", "▁a", "b"}, "hi ab"},
		{[]string{"▁", "▁hi"}, " hi"}, // Strip removes one space only
		{[]string{"<0xC3>", "<0xA9>", "a"}, "éa"},
		{[]string{"<0xC3>", "a", "<0xE2>", "<0x82>"}, "\uFFFDa\uFFFD\uFFFD"},
		{[]string{"<0xC3>", "<0xA9>", "<0xFF>"}, "\uFFFD\uFFFD\uFFFD"},
		{[]string{"<s>", "▁hi", "</s>"}, "<s> hi</s>"},
	} {
		if got := tok.DecodeString(tok.ids(t, c.tokens...), false); got != c.want {
			t.Errorf("%q: got %q want %q", c.tokens, got, c.want)
		}
	}
	if got := tok.DecodeString(tok.ids(t, "<s>", "▁hi", "</s>"), true); got != "hi" {
		t.Errorf("skipping specials: %q", got)
	}
	meta := spTokenizer(t, func(m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
		m["decoder"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}
	})
	if got := meta.DecodeString(meta.ids(t, "▁hi", "▁a", "b", "▁"), false); got != "hi ab " {
		t.Errorf("Metaspace decoder: %q", got)
	}
}

// TestMetaspacePrependScheme: "first" puts U+2581 only before the start of
// the input, not after an added token; "always" before every segment;
// "never" nowhere.
func TestMetaspacePrependScheme(t *testing.T) {
	for scheme, want := range map[string][]string{
		"first":  {"▁hi", "</s>", "h", "i", "▁a"},
		"always": {"▁hi", "</s>", "▁hi", "▁a"},
		"never":  {"h", "i", "</s>", "h", "i", "▁a"},
	} {
		tok := spTokenizer(t, func(m map[string]any) {
			m["normalizer"] = nil
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": true}
		})
		if got := tok.Encode(nil, "hi</s>hi a", false); !slices.Equal(got, tok.ids(t, want...)) {
			t.Errorf("%s: got %v want %v", scheme, got, tok.ids(t, want...))
		}
	}
}

func TestLiteralSplit(t *testing.T) {
	for behavior, want := range map[string]string{
		"Isolated":           "The|-|final|-|-|countdown",
		"MergedWithPrevious": "The-|final-|-|countdown",
		"MergedWithNext":     "The|-final|-|-countdown",
		"Contiguous":         "The|-|final|--|countdown",
	} {
		sp, err := newLiteralSplitter("-", behavior)
		if err != nil {
			t.Fatal(err)
		}
		s := "The-final--countdown"
		var pieces []string
		for i := 0; i < len(s); {
			e := sp.next(s, i)
			pieces = append(pieces, s[i:e])
			i = e
		}
		if got := strings.Join(pieces, "|"); got != want {
			t.Errorf("%s: got %s want %s", behavior, got, want)
		}
	}
}

// TestSentencePieceStream: streaming one id at a time gives the whole
// decode, holds a character spelled in byte tokens until it is complete,
// and strips the leading space only at the start.
func TestSentencePieceStream(t *testing.T) {
	tok := spTokenizer(t, nil)
	ids := tok.ids(t, "▁hi", "<0xE2>", "<0x82>", "<0xAC>", "▁a", "b", "▁hi")
	st := tok.NewStream(false)
	var chunks []string
	for _, id := range ids {
		chunks = append(chunks, string(st.Next(nil, []uint32{id})))
	}
	if want := []string{"hi", "", "", "€", " a", "b", " hi"}; !slices.Equal(chunks, want) {
		t.Fatalf("chunks %q, want %q", chunks, want)
	}
	if rest := st.Flush(nil); len(rest) != 0 {
		t.Fatalf("flush gave %q", rest)
	}
	st = tok.NewStream(false)
	out := st.Next(nil, tok.ids(t, "▁hi", "<0xE2>", "<0x82>"))
	if got := string(st.Flush(out)); got != tok.DecodeString(tok.ids(t, "▁hi", "<0xE2>", "<0x82>"), false) {
		t.Fatalf("flush of an unfinished character: %q", got)
	}
}

// TestWordCutsAreExact: cutting pieces before U+2581 (charSymbols.
// setWordCuts) gives the ids of BPE on the whole piece, on text where
// Gemma 3's one token with an inner U+2581 (">▁</") can form.
func TestWordCutsAreExact(t *testing.T) {
	for _, name := range []string{"llama2", "gemma3"} {
		cut, err := LoadDir(filepath.Join("testdata", "families", name))
		if err != nil {
			t.Fatal(err)
		}
		whole, _ := LoadDir(filepath.Join("testdata", "families", name))
		whole.model.chars.cutWords = false
		if !cut.model.chars.cutWords {
			t.Fatalf("%s: no word cuts", name)
		}
		var g familyGolden
		readJSON(t, filepath.Join("testdata", "families", name, "golden.json"), &g)
		texts := []string{"a> </b> >  </ x>\u2581</y", "<b> </b>"}
		for _, e := range g.Encode {
			texts = append(texts, e.Text, e.Text+" > </"+e.Text)
		}
		for _, s := range texts {
			if got, want := cut.Encode(nil, s, false), whole.Encode(nil, s, false); !slices.Equal(got, want) {
				t.Errorf("%s %q: cut %v, whole %v", name, s, got, want)
			}
		}
	}
}

// FuzzSentencePieceRoundTrip: any input encodes without panicking with the
// Llama 2 and Gemma 3 excerpts (most characters fall back to bytes
// there), and decoding gives the input back with invalid UTF-8 replaced,
// for text without U+2581 (which decodes as a space) and, for Llama 2,
// without its special tokens (Prepend puts U+2581 after each).
func FuzzSentencePieceRoundTrip(f *testing.F) {
	var corpus []corpusItem
	readJSON(f, "testdata/corpus.json", &corpus)
	for _, c := range corpus {
		f.Add(c.input(f))
	}
	var toks []*Tokenizer
	for _, name := range []string{"llama2", "gemma3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", name))
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "▁") {
			return
		}
		want := toValidUTF8(s)
		for i, tok := range toks {
			ids := tok.Encode(nil, s, false)
			if i == 0 && (strings.Contains(want, "<s>") || strings.Contains(want, "</s>") || strings.Contains(want, "<unk>")) {
				continue
			}
			if got := tok.DecodeString(ids, false); got != want {
				t.Fatalf("tokenizer %d: round trip of %q gave %q", i, s, got)
			}
		}
	})
}

// TestStreamPrime: primed with the prompt, the first generated token keeps
// its leading space (as after vLLM's priming); unprimed, it starts the text.
func TestStreamPrime(t *testing.T) {
	tok, err := LoadDir(filepath.Join("testdata", "families", "llama2"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode(nil, "The quick brown fox jumps over the lazy dog.", true)
	gen := tok.Encode(nil, "The quick brown", false)
	st := tok.NewStream(true)
	st.Prime(prompt)
	var out []byte
	for _, id := range gen {
		out = st.Next(out, []uint32{id})
	}
	if got := string(st.Flush(out)); got != " The quick brown" {
		t.Fatalf("primed: %q", got)
	}
	st = tok.NewStream(true)
	if got := string(st.Flush(st.Next(nil, gen))); got != "The quick brown" {
		t.Fatalf("unprimed: %q", got)
	}
}
