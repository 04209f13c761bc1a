package tokenize

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestClassPostProcessor: for LlamaTokenizerFast and GemmaTokenizerFast,
// add_bos_token and add_eos_token decide the tokens around a sequence,
// whatever tokenizer.json's post-processor says, as their transformers
// constructors make it; other classes keep tokenizer.json's.
func TestClassPostProcessor(t *testing.T) {
	dir := filepath.Join("testdata", "families", "llama2")
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tm map[string]any
	if err := json.Unmarshal(tj, &tm); err != nil {
		t.Fatal(err)
	}
	tm["post_processor"] = nil // adds nothing, as DeepSeek V3's ByteLevel one
	bare, _ := json.Marshal(tm)
	const bos, eos = 1, 2 // <s>, </s>
	for _, c := range []struct {
		name   string
		config map[string]any
		want   []uint32 // around the text's ids
		suffix []uint32
	}{
		{"llama default", map[string]any{"tokenizer_class": "LlamaTokenizerFast"}, []uint32{bos}, nil},
		{"slow name", map[string]any{"tokenizer_class": "LlamaTokenizer", "add_bos_token": true}, []uint32{bos}, nil},
		{"eos too", map[string]any{"tokenizer_class": "GemmaTokenizerFast", "add_eos_token": true}, []uint32{bos}, []uint32{eos}},
		{"bos off", map[string]any{"tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false}, nil, nil},
		{"other class", map[string]any{"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": true}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.config["bos_token"], c.config["eos_token"] = "<s>", "</s>"
			cj, _ := json.Marshal(c.config)
			tok, err := New(bare, cj)
			if err != nil {
				t.Fatal(err)
			}
			text := tok.Encode(nil, "Hello world", false)
			want := slices.Concat(c.want, text, c.suffix)
			if got := tok.Encode(nil, "Hello world", true); !slices.Equal(got, want) {
				t.Fatalf("with special tokens %v, want %v", got, want)
			}
		})
	}
	cj, _ := json.Marshal(map[string]any{"tokenizer_class": "LlamaTokenizerFast"})
	if _, err := New(bare, cj); !errors.Is(err, ErrInvalid) {
		t.Fatalf("add_bos_token (default true) without a bos_token: %v, want ErrInvalid", err)
	}
}
