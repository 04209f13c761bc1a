package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// tiny is a shape small enough that a test writes the whole model with the
// Qwen3 vocabulary in a few milliseconds.
func tiny() Shape {
	return Shape{Embedding: 8, Blocks: 2, FeedForward: 16, Heads: 2, KVHeads: 1,
		ContextLength: 512, RMSEpsilon: 1e-5, RopeFreqBase: 10000}
}

func writeTiny(t *testing.T, mod func(*Options)) ([]byte, Info) {
	t.Helper()
	o := Defaults()
	o.Shape = tiny()
	if mod != nil {
		mod(&o)
	}
	var buf bytes.Buffer
	info, err := Write(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), info
}

func TestFloat16(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},
		{65520, 0x7c00},       // rounds past the largest half
		{1.0 / 3, 0x3555},     // rounds down
		{0x1p-14, 0x0400},     // smallest normal
		{0x1p-24, 0x0001},     // smallest subnormal
		{0x1p-25, 0x0000},     // half of it: ties to even (zero)
		{0x1.8p-25, 0x0001},   // above half: up
		{0x1.002p0, 0x3c00},   // below the tie: down
		{0x1.006p0, 0x3c02},   // a tie above an odd mantissa: up to even
		{0x1.ffep-15, 0x0400}, // subnormal rounding carries into the exponent
		{0.0346, 0x286e},      // the largest weight magnitude's neighbourhood
		{-0.0199999, 0xa51f},  // a typical weight
		{1e-8, 0x0000},        // underflows to zero
		{float32(math.Inf(1)), 0x7c00},
	} {
		if got := float16(c.in); got != c.want {
			t.Errorf("float16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestWriteLayout(t *testing.T) {
	b, info := writeTiny(t, nil)
	f, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.version != 3 {
		t.Errorf("version %d", f.version)
	}
	s := tiny()
	want := map[string]any{
		"general.architecture":                   "llama",
		"general.alignment":                      uint32(32),
		"general.file_type":                      uint32(1),
		"llama.context_length":                   uint32(512),
		"llama.embedding_length":                 uint32(8),
		"llama.block_count":                      uint32(2),
		"llama.feed_forward_length":              uint32(16),
		"llama.attention.head_count":             uint32(2),
		"llama.attention.head_count_kv":          uint32(1),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count":             uint32(4),
		"llama.rope.freq_base":                   float32(10000),
		"llama.vocab_size":                       uint32(info.VocabSize),
		"tokenizer.ggml.model":                   "gpt2",
		"tokenizer.ggml.pre":                     "qwen2",
		"tokenizer.ggml.add_bos_token":           false,
		"tokenizer.ggml.add_eos_token":           false,
		"tokenizer.ggml.bos_token_id":            uint32(151643),
		"tokenizer.ggml.eos_token_id":            uint32(151645),
		"tokenizer.ggml.padding_token_id":        uint32(151643),
	}
	for k, v := range want {
		if f.kvs[k] != v {
			t.Errorf("%s = %#v, want %#v", k, f.kvs[k], v)
		}
	}
	if tmpl, _ := f.kvs["tokenizer.chat_template"].(string); !strings.Contains(tmpl, "<|im_start|>") {
		t.Errorf("chat template missing or wrong: %.60q", tmpl)
	}
	if n := len(f.kvs["tokenizer.ggml.tokens"].([]string)); n != info.VocabSize || n != 151669 {
		t.Errorf("%d tokens, info says %d", n, info.VocabSize)
	}
	if n := len(f.kvs["tokenizer.ggml.token_type"].([]int32)); n != info.VocabSize {
		t.Errorf("%d token types", n)
	}

	specs := s.tensors(info.VocabSize)
	if len(f.tensors) != len(specs) || len(specs) != 3+9*s.Blocks {
		t.Fatalf("%d tensors, want %d", len(f.tensors), 3+9*s.Blocks)
	}
	var params, end int64
	for i, got := range f.tensors {
		sp := specs[i]
		if got.name != sp.name || !slices.Equal(got.ne, sp.ne) {
			t.Errorf("tensor %d: %s %v, want %s %v", i, got.name, got.ne, sp.name, sp.ne)
		}
		if got.offset%32 != 0 || got.offset < end {
			t.Errorf("%s at offset %d (previous ends at %d): misaligned or overlapping", got.name, got.offset, end)
		}
		wantType := F16
		if sp.kind == kindNorm {
			wantType = F32
		}
		if got.typ != wantType {
			t.Errorf("%s is type %d, want %d", got.name, got.typ, wantType)
		}
		end = got.offset + sp.elements()*got.typ.size()
		params += sp.elements()
	}
	if f.dataAt%32 != 0 || f.dataAt+aligned(end) != f.size || info.Bytes != f.size {
		t.Errorf("data at %d, tensors end at %d, file %d bytes, info says %d", f.dataAt, end, f.size, info.Bytes)
	}
	if params != info.Params || params != s.Params(info.VocabSize) {
		t.Errorf("params %d, info %d, Params %d", params, info.Params, s.Params(info.VocabSize))
	}
	// Norm weights are ones; plain matrices are small, nonzero and not all
	// equal (the steered ones are checked by TestSteering).
	for i, te := range f.tensors {
		d := f.data(b, te)
		switch specs[i].kind {
		case kindNorm:
			for i := 0; i < len(d); i += 4 {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(d[i:])); v != 1 {
					t.Fatalf("%s[%d] = %g, want 1", te.name, i/4, v)
				}
			}
		case kindMatrix:
			distinct := map[uint16]bool{}
			for i := 0; i < len(d); i += 2 {
				h := binary.LittleEndian.Uint16(d[i:])
				if h&0x7fff > 0x2870 { // |x| > about 0.0347
					t.Fatalf("%s[%d] = %#04x, beyond the weight range", te.name, i/2, h)
				}
				distinct[h] = true
			}
			if len(distinct) < 16 {
				t.Errorf("%s has %d distinct values", te.name, len(distinct))
			}
		}
	}
}

// TestSteering checks the weights that keep generation on whole-UTF-8
// normal tokens: the anchor in every embedding, dimension 0 left alone by
// the blocks, and output rows that avoid every other token.
func TestSteering(t *testing.T) {
	for _, typ := range []TensorType{F16, F32} {
		b, info := writeTiny(t, func(o *Options) { o.Type = typ })
		f, err := parse(b)
		if err != nil {
			t.Fatal(err)
		}
		e := int64(tiny().Embedding)
		at := func(name string, row, col int64) float32 {
			for _, te := range f.tensors {
				if te.name == name {
					d, i := f.data(b, te), row*te.ne[0]+col
					if typ == F16 {
						return halfToFloat(binary.LittleEndian.Uint16(d[2*i:]))
					}
					return math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
				}
			}
			t.Fatalf("no tensor %s", name)
			return 0
		}
		gen := info.Vocab.Generate
		for _, id := range []int64{0, 220, 151642, 151643, 151645, 151668} {
			if got := at("token_embd.weight", id, 0); got != anchor {
				t.Errorf("%v: embedding %d[0] = %g, want %g", typ, id, got, anchor)
			}
			want0, restZero := float32(0), false
			if !gen[id] {
				want0, restZero = avoid, true
			}
			if got := at("output.weight", id, 0); got != want0 {
				t.Errorf("%v: output row %d[0] = %g, want %g", typ, id, got, want0)
			}
			for col := int64(1); col < e; col++ {
				if v := at("output.weight", id, col); restZero && v != 0 {
					t.Errorf("%v: output row %d[%d] = %g in an avoided row", typ, id, col, v)
				}
			}
		}
		for _, name := range []string{"blk.0.attn_output.weight", "blk.1.ffn_down.weight"} {
			n := int64(tiny().Embedding)
			if strings.Contains(name, "ffn") {
				n = int64(tiny().FeedForward)
			}
			nonzero := 0
			for col := range n {
				if at(name, 0, col) != 0 {
					t.Errorf("%v: %s writes dimension 0 (column %d)", typ, name, col)
				}
				if v := at(name, 1, col); v != 0 {
					nonzero++
					if math.Abs(float64(v)) > 0.0347/blockOutShrink+1e-6 {
						t.Errorf("%v: %s[1][%d] = %g, not shrunk", typ, name, col, v)
					}
				}
			}
			if nonzero < int(n)/2 {
				t.Errorf("%v: %s row 1 is mostly zero", typ, name)
			}
		}
	}
	b, _ := writeTiny(t, func(o *Options) { o.GenerateAll = true })
	f, _ := parse(b)
	if v := halfToFloat(binary.LittleEndian.Uint16(f.data(b, f.tensors[0]))); v == anchor {
		t.Error("GenerateAll still anchors the embeddings")
	}
}

// halfToFloat converts IEEE half precision to float32 (normal and zero
// values, which is all the writer produces).
func halfToFloat(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10&0x1f), float32(h&0x3ff)
	if exp == 0 {
		return sign * mant * 0x1p-24
	}
	return sign * float32(math.Ldexp(float64(1+mant/1024), exp-15))
}

func TestWriteTiedAndF32(t *testing.T) {
	b, info := writeTiny(t, func(o *Options) { o.Shape.TiedOutput, o.GenerateAll, o.Type = true, true, F32 })
	f, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, te := range f.tensors {
		if te.name == "output.weight" {
			t.Error("tied model has an output tensor")
		}
		if te.typ != F32 {
			t.Errorf("%s is type %d in an F32 model", te.name, te.typ)
		}
	}
	if f.kvs["general.file_type"] != uint32(0) {
		t.Errorf("file type %v", f.kvs["general.file_type"])
	}
	if untied := tiny().Params(info.VocabSize); info.Params != untied-int64(8*info.VocabSize) {
		t.Errorf("tied params %d, untied %d", info.Params, untied)
	}
}

func TestDeterministic(t *testing.T) {
	sum := func(seed uint64) [32]byte {
		b, _ := writeTiny(t, func(o *Options) { o.Seed = seed })
		return sha256.Sum256(b)
	}
	a, b := sum(7), sum(7)
	if a != b {
		t.Error("one seed gave two files")
	}
	if a == sum(8) {
		t.Error("two seeds gave one file")
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	o := Defaults()
	o.Shape = tiny()
	info, err := WriteFile(path, o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != info.Bytes {
		t.Fatalf("stat %v, size %d, info %d", err, st.Size(), info.Bytes)
	}
	if left, _ := filepath.Glob(path + ".tmp*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, err := WriteFile(filepath.Join(t.TempDir(), "none", "m.gguf"), o); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestQwen3Vocab checks the converted built-in tokenizer against kvgate's
// own reading of the same files.
func TestQwen3Vocab(t *testing.T) {
	v, err := Defaults().vocab() // NewVocab(BuiltinTokenizer()), once per process
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tokens) != tok.VocabSize() {
		t.Errorf("%d tokens, kvgate's tokenizer has %d", len(v.Tokens), tok.VocabSize())
	}
	for _, c := range []struct {
		text string
		typ  int32
	}{
		{"<|endoftext|>", TokenControl},
		{"<|im_start|>", TokenControl},
		{"<|im_end|>", TokenControl},
		{"<|vision_pad|>", TokenControl},
		{"<tool_call>", TokenUserDefined},
		{"<think>", TokenUserDefined},
		{"</think>", TokenUserDefined},
	} {
		id, ok := tok.TokenID(c.text)
		if !ok {
			t.Fatalf("kvgate has no %q", c.text)
		}
		if v.Tokens[id] != c.text || v.Types[id] != c.typ {
			t.Errorf("id %d: %q type %d, want %q type %d", id, v.Tokens[id], v.Types[id], c.text, c.typ)
		}
	}
	// Normal tokens are byte-level spellings: kvgate decodes each to the
	// bytes the spelling stands for.
	for _, id := range []uint32{0, 220, 279, 1773, 100000, 151642} {
		if v.Types[id] != TokenNormal {
			t.Errorf("id %d type %d", id, v.Types[id])
		}
		if got := tok.DecodeString([]uint32{id}, false); byteLevel(got) != v.Tokens[id] {
			t.Errorf("id %d decodes to %q, spelled %q", id, got, v.Tokens[id])
		}
	}
	generate := 0
	for _, g := range v.Generate {
		if g {
			generate++
		}
	}
	t.Logf("%d of %d tokens are generated by a steered model", generate, len(v.Tokens))
	for _, c := range []struct {
		id   int
		want bool
	}{{220, true}, {279, true}, {100000, true}, {151645, false}, {151667, false}, {136, false}, {232, false}} {
		if v.Generate[c.id] != c.want {
			t.Errorf("Generate[%d] (%q) = %v", c.id, v.Tokens[c.id], v.Generate[c.id])
		}
	}
	if v.Pre != "qwen2" || len(v.Merges) != 151387 || v.Merges[0] != "Ġ Ġ" {
		t.Errorf("pre %q, %d merges, first %q", v.Pre, len(v.Merges), v.Merges[0])
	}
	if eos, _ := tok.EOSID(); v.EOS != int(eos) || v.AddBOS || v.AddEOS {
		t.Errorf("eos %d (kvgate %d), add bos %v eos %v", v.EOS, eos, v.AddBOS, v.AddEOS)
	}
}

// byteLevel spells bytes as GPT-2's byte-level alphabet does.
func byteLevel(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case c >= '!' && c <= '~', c >= 0xa1 && c <= 0xac, c >= 0xae:
			b.WriteRune(rune(c))
		default:
			n := 0
			for x := 0; x < int(c); x++ {
				if !(x >= '!' && x <= '~' || x >= 0xa1 && x <= 0xac || x >= 0xae) {
					n++
				}
			}
			b.WriteRune(rune(256 + n))
		}
	}
	return b.String()
}

// miniTokenizer is a tokenizer.json with a handful of tokens.
func miniTokenizer(regex, merges, added string) []byte {
	return []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3},"merges":` + merges + `},
		"added_tokens":` + added + `,
		"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + regex + `}},{"type":"ByteLevel"}]}}`)
}

const qwenRegex = `"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"`

func TestNewVocab(t *testing.T) {
	added := `[{"id":6,"content":"<|end|>","special":true},{"id":7,"content":"<tag>","special":false},{"id":8,"content":"<|x|>","special":false}]`
	for _, c := range []struct {
		name  string
		files TokenizerFiles
		pre   string
		err   error
		check func(*Vocab) string
	}{
		{name: "qwen regex, gaps padded, types", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `["a b"]`, added)},
			check: func(v *Vocab) string {
				if v.Pre != "qwen2" || len(v.Tokens) != 9 {
					return "pre or length"
				}
				if v.Tokens[4] != "[PAD4]" || v.Types[4] != TokenUnused || v.Types[5] != TokenUnused {
					return "gap not padded"
				}
				if v.Types[6] != TokenControl || v.Types[7] != TokenUserDefined || v.Types[8] != TokenControl {
					return "added token types"
				}
				if v.BOS != -1 || v.EOS != -1 || v.Pad != -1 {
					return "special ids without a config"
				}
				return ""
			}},
		{name: "merges as pairs", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[["a","b"]]`, `[]`)},
			check: func(v *Vocab) string {
				if !slices.Equal(v.Merges, []string{"a b"}) {
					return "merges " + strings.Join(v.Merges, "|")
				}
				return ""
			}},
		{name: "config: specials, add_bos, template list",
			files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[]`, added), Config: []byte(`{"bos_token":{"content":"<|x|>"},
				"eos_token":"<|end|>","add_bos_token":true,
				"chat_template":[{"name":"default","template":"D"},{"name":"tool_use","template":"T"}]}`)},
			check: func(v *Vocab) string {
				if v.BOS != 8 || v.EOS != 6 || v.Pad != -1 || !v.AddBOS || v.AddEOS {
					return "special ids or add flags"
				}
				if v.ChatTemplate != "D" || v.NamedTemplates["tool_use"] != "T" {
					return "templates"
				}
				return ""
			}},
		{name: "BOS falls back to the pad token", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[]`, added),
			Config: []byte(`{"bos_token":null,"pad_token":"<|end|>"}`)},
			check: func(v *Vocab) string {
				if v.BOS != 6 || v.Pad != 6 {
					return "bos/pad"
				}
				return ""
			}},
		{name: "unknown regex", files: TokenizerFiles{JSON: miniTokenizer(`"\\s+"`, `[]`, `[]`)}, err: ErrUnknownPreTokenizer},
		{name: "unknown regex with an override", files: TokenizerFiles{JSON: miniTokenizer(`"\\s+"`, `[]`, `[]`)}, pre: "gpt-2",
			check: func(v *Vocab) string {
				if v.Pre != "gpt-2" {
					return "pre " + v.Pre
				}
				return ""
			}},
		{name: "two ids, one spelling", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[]`, `[{"id":5,"content":"ab"}]`)}, err: ErrInvalidTokenizer},
		{name: "id too large", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[]`, `[{"id":99999999,"content":"<x>"}]`)}, err: ErrInvalidTokenizer},
		{name: "not BPE", files: TokenizerFiles{JSON: []byte(`{"model":{"type":"Unigram"}}`)}, err: ErrInvalidTokenizer},
		{name: "malformed", files: TokenizerFiles{JSON: []byte(`{`)}, err: ErrInvalidTokenizer},
		{name: "bad merges", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `{}`, `[]`)}, err: ErrInvalidTokenizer},
		{name: "merge pair with a space", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[["a b","c"]]`, `[]`)}, err: ErrInvalidTokenizer},
		{name: "malformed config", files: TokenizerFiles{JSON: miniTokenizer(qwenRegex, `[]`, `[]`), Config: []byte(`[`)}, err: ErrInvalidTokenizer},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := NewVocab(c.files, c.pre)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("error %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := c.check(v); msg != "" {
				t.Errorf("%s: %+v", msg, v)
			}
		})
	}
}

func TestShapes(t *testing.T) {
	const qwen3Vocab = 151669
	for _, c := range []struct {
		name     string
		shape    Shape
		min, max int64
	}{
		{"Small", Small(), 38e6, 45e6},
		{"Qwen25HalfB", Qwen25HalfB(), 625e6, 635e6},
	} {
		if err := c.shape.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if p := c.shape.Params(qwen3Vocab); p < c.min || p > c.max {
			t.Errorf("%s: %d parameters, want %d..%d", c.name, p, c.min, c.max)
		}
	}
	for _, c := range []struct {
		name string
		mod  func(*Shape)
	}{
		{"zero blocks", func(s *Shape) { s.Blocks = 0 }},
		{"heads do not divide embedding", func(s *Shape) { s.Heads = 3 }},
		{"kv heads do not divide heads", func(s *Shape) { s.KVHeads = 3 }},
		{"odd head size", func(s *Shape) { s.Embedding, s.Heads, s.KVHeads = 12, 4, 4 }},
		{"no context", func(s *Shape) { s.ContextLength = 0 }},
		{"zero epsilon", func(s *Shape) { s.RMSEpsilon = 0 }},
	} {
		s := Small()
		c.mod(&s)
		if err := s.Validate(); !errors.Is(err, ErrInvalidShape) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	o := Defaults()
	o.Shape.TiedOutput = true
	if err := o.Validate(); !errors.Is(err, ErrInvalidShape) {
		t.Errorf("tied output, steered: %v", err)
	}
	if qwen := Qwen25HalfB(); qwen.Params(qwen3Vocab)-int64(qwen.Embedding*qwen3Vocab) > 495e6 {
		t.Errorf("Qwen25HalfB tied would have %d parameters", qwen.Params(qwen3Vocab)-int64(qwen.Embedding*qwen3Vocab))
	}
	o = Defaults()
	o.Type = 2
	if err := o.Validate(); !errors.Is(err, ErrInvalidShape) {
		t.Errorf("tensor type 2: %v", err)
	}
	if _, err := Write(&bytes.Buffer{}, o); err == nil {
		t.Error("Write took an invalid tensor type")
	}
}

// FuzzNewVocab feeds tokenizer.json variants to the converter: it returns
// a vocabulary or an error, never panics, and a vocabulary it returns has
// a type for every token and no spelling twice.
func FuzzNewVocab(f *testing.F) {
	f.Add(miniTokenizer(qwenRegex, `["a b"]`, `[{"id":6,"content":"<|end|>","special":true}]`), []byte(`{"eos_token":"<|end|>"}`))
	f.Add(miniTokenizer(qwenRegex, `[["a","b"]]`, `[{"id":1,"content":"b"}]`), []byte(`{"chat_template":[{"name":"x"}]}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":-1}}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, tj, cfg []byte) {
		if len(tj) > 1<<16 {
			return
		}
		v, err := NewVocab(TokenizerFiles{JSON: tj, Config: cfg}, "")
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for id, s := range v.Tokens {
			if v.Types[id] == 0 || seen[s] {
				t.Fatalf("id %d %q: type %d, seen %v", id, s, v.Types[id], seen[s])
			}
			seen[s] = true
		}
	})
}
