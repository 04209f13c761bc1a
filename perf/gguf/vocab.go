package gguf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Token types as llama.cpp stores them in tokenizer.ggml.token_type
// (gguf-py/gguf/constants.py TokenType, src/llama-vocab.h).
const (
	TokenNormal      int32 = 1
	TokenUnknown     int32 = 2
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
	TokenByte        int32 = 6
)

// TokenizerFiles holds the contents of a Hugging Face tokenizer.json and
// tokenizer_config.json (which may be empty).
type TokenizerFiles struct {
	JSON   []byte
	Config []byte
}

// LoadTokenizerDir reads tokenizer.json and, when present,
// tokenizer_config.json from dir, as kvgate's --tokenizer does.
func LoadTokenizerDir(dir string) (TokenizerFiles, error) {
	var f TokenizerFiles
	var err error
	if f.JSON, err = os.ReadFile(filepath.Join(dir, "tokenizer.json")); err != nil {
		return f, fmt.Errorf("reading tokenizer: %w", err)
	}
	if f.Config, err = os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err != nil && !os.IsNotExist(err) {
		return f, fmt.Errorf("reading tokenizer config: %w", err)
	}
	return f, nil
}

// Vocab is a tokenizer as llama.cpp's metadata holds it.
type Vocab struct {
	// Pre is tokenizer.ggml.pre, the pre-tokenizer llama.cpp applies.
	Pre string
	// Tokens and Types are indexed by token id.
	Tokens []string
	Types  []int32
	// Generate marks, by id, the tokens a steered model generates: normal
	// tokens whose bytes are whole UTF-8 on their own (most of them; not
	// the fragments of multi-byte characters, nor added tokens).
	Generate []bool
	// Merges are "left right" pairs, highest priority first.
	Merges []string
	// BOS, EOS and Pad are token ids, -1 when the tokenizer names none.
	BOS, EOS, Pad int
	// AddBOS and AddEOS are tokenizer_config.json's add_bos_token and
	// add_eos_token (false when absent).
	AddBOS, AddEOS bool
	// ChatTemplate is tokenizer_config.json's chat template ("" if none);
	// NamedTemplates holds the others of a template list by name.
	ChatTemplate   string
	NamedTemplates map[string]string
}

// preTokenizers maps a Split pre-tokenizer's regex to the llama.cpp
// pre-tokenizer that implements it (src/llama-vocab.cpp, where each
// LLAMA_VOCAB_PRE_TYPE quotes the regex of the tokenizer.json it was taken
// from).
var preTokenizers = map[string]string{
	// Qwen2, Qwen2.5, Qwen3 (LLAMA_VOCAB_PRE_TYPE_QWEN2).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "qwen2",
	// Llama 3 (LLAMA_VOCAB_PRE_TYPE_LLAMA3).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
}

// maxVocab bounds token ids (the largest vocabularies in use are about
// 262,000), so a stray id does not make the converter allocate gigabytes.
const maxVocab = 1 << 22

// hfTokenizer is the part of tokenizer.json a GGUF vocabulary needs.
type hfTokenizer struct {
	Model struct {
		Type   string          `json:"type"`
		Vocab  map[string]int  `json:"vocab"`
		Merges json.RawMessage `json:"merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	PreTokenizer *hfComponent `json:"pre_tokenizer"`
}

type hfComponent struct {
	Type          string         `json:"type"`
	PreTokenizers []*hfComponent `json:"pretokenizers"`
	Pattern       *struct {
		Regex *string `json:"Regex"`
	} `json:"pattern"`
}

type hfConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
}

// NewVocab converts a byte-level BPE tokenizer to llama.cpp's form. pre
// names the llama.cpp pre-tokenizer; empty picks it from tokenizer.json's
// Split regex and fails with ErrUnknownPreTokenizer for a regex it does not
// know, rather than write a file llama.cpp would tokenize differently.
func NewVocab(files TokenizerFiles, pre string) (*Vocab, error) {
	var tj hfTokenizer
	if err := json.Unmarshal(files.JSON, &tj); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrInvalidTokenizer, err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: model type %q (only byte-level BPE)", ErrInvalidTokenizer, tj.Model.Type)
	}
	v := &Vocab{Pre: pre, BOS: -1, EOS: -1, Pad: -1}
	if v.Pre == "" {
		re := splitRegex(tj.PreTokenizer)
		if v.Pre = preTokenizers[re]; v.Pre == "" {
			return nil, fmt.Errorf("%w: %q", ErrUnknownPreTokenizer, re)
		}
	}
	if err := v.setTokens(&tj); err != nil {
		return nil, err
	}
	var err error
	if v.Merges, err = mergeLines(tj.Model.Merges); err != nil {
		return nil, err
	}
	if len(files.Config) > 0 {
		if err := v.setConfig(files.Config); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// splitRegex returns the regex of the first Split pre-tokenizer in c.
func splitRegex(c *hfComponent) string {
	if c == nil {
		return ""
	}
	if c.Type == "Split" && c.Pattern != nil && c.Pattern.Regex != nil {
		return *c.Pattern.Regex
	}
	for _, sub := range c.PreTokenizers {
		if re := splitRegex(sub); re != "" {
			return re
		}
	}
	return ""
}

// setTokens fills Tokens and Types by id: vocabulary entries, then added
// tokens over them, then "[PAD<id>]" in any gap, as llama.cpp's converter
// does (conversion/base.py get_vocab_base).
func (v *Vocab) setTokens(tj *hfTokenizer) error {
	n := 0
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n > maxVocab {
		return fmt.Errorf("%w: token id %d beyond %d", ErrInvalidTokenizer, n-1, maxVocab)
	}
	v.Tokens, v.Types = make([]string, n), make([]int32, n)
	for s, id := range tj.Model.Vocab {
		if id < 0 {
			return fmt.Errorf("%w: token %q has id %d", ErrInvalidTokenizer, s, id)
		}
		v.Tokens[id], v.Types[id] = s, TokenNormal
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return fmt.Errorf("%w: added token %d %q", ErrInvalidTokenizer, a.ID, a.Content)
		}
		v.Tokens[a.ID], v.Types[a.ID] = a.Content, TokenUserDefined
		if a.Special || looksSpecial(a.Content) {
			v.Types[a.ID] = TokenControl
		}
	}
	v.Generate = make([]bool, n)
	seen := make(map[string]int, n)
	for id := range v.Tokens {
		if v.Types[id] == TokenNormal {
			b, ok := byteLevelBytes(v.Tokens[id])
			v.Generate[id] = ok && len(b) > 0 && utf8.Valid(b)
		}
		if v.Types[id] == 0 {
			v.Tokens[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), TokenUnused
		}
		// llama.cpp maps text to id and asserts the map is as long as the
		// list: two ids with one spelling would not load.
		if other, dup := seen[v.Tokens[id]]; dup {
			return fmt.Errorf("%w: ids %d and %d are both %q", ErrInvalidTokenizer, other, id, v.Tokens[id])
		}
		seen[v.Tokens[id]] = id
	}
	return nil
}

// byteUnicode maps each byte to the rune that GPT-2's byte-level BPE spells
// it with: printable Latin-1 as itself, the rest from U+0100 on.
var byteUnicode = func() (t [256]rune) {
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			t[b] = rune(b)
		} else {
			t[b] = rune(256 + n)
			n++
		}
	}
	return t
}()

// unicodeByte inverts byteUnicode.
var unicodeByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteUnicode {
		m[r] = byte(b)
	}
	return m
}()

// byteLevelBytes returns the bytes a byte-level spelling stands for, ok
// false when it holds a rune outside the byte alphabet.
func byteLevelBytes(s string) (b []byte, ok bool) {
	for _, r := range s {
		c, in := unicodeByte[r]
		if !in {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}

// looksSpecial is llama.cpp's converter's test for added tokens that a
// tokenizer forgot to mark special (conversion/base.py
// does_token_look_special), reduced to the forms byte-level BPE
// tokenizers use.
func looksSpecial(s string) bool {
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>"))
}

// mergeLines reads merges as "a b" strings or ["a", "b"] pairs and returns
// them as the strings tokenizer.ggml.merges holds.
func mergeLines(raw json.RawMessage) ([]string, error) {
	var lines []string
	if err := json.Unmarshal(raw, &lines); err == nil {
		return lines, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("%w: merges are neither strings nor pairs", ErrInvalidTokenizer)
	}
	lines = make([]string, len(pairs))
	for i, p := range pairs {
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			// llama.cpp splits each merge at its first space.
			return nil, fmt.Errorf("%w: merge %d %q has a space", ErrInvalidTokenizer, i, p)
		}
		lines[i] = p[0] + " " + p[1]
	}
	return lines, nil
}

// setConfig reads the special tokens, add_bos/add_eos and the chat template
// from tokenizer_config.json.
func (v *Vocab) setConfig(b []byte) error {
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%w: tokenizer_config.json: %v", ErrInvalidTokenizer, err)
	}
	ids := make(map[string]int, len(v.Tokens))
	for id, s := range v.Tokens {
		ids[s] = id
	}
	lookup := func(raw json.RawMessage) int {
		if id, ok := ids[tokenContent(raw)]; ok && len(raw) > 0 {
			return id
		}
		return -1
	}
	v.BOS, v.EOS, v.Pad = lookup(c.BOSToken), lookup(c.EOSToken), lookup(c.PadToken)
	if v.BOS < 0 {
		// Qwen names no BOS in tokenizer_config.json; its config.json's
		// bos_token_id is the pad token, which llama.cpp's converter
		// writes. Without one llama.cpp would default to id 11.
		v.BOS = v.Pad
	}
	v.AddBOS = c.AddBOSToken != nil && *c.AddBOSToken
	v.AddEOS = c.AddEOSToken != nil && *c.AddEOSToken
	return v.setTemplates(c.ChatTemplate)
}

// setTemplates reads a chat template given as a string or as a list of
// {"name", "template"} (the "default" one becomes ChatTemplate).
func (v *Vocab) setTemplates(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if json.Unmarshal(raw, &v.ChatTemplate) == nil {
		return nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("%w: chat_template is neither a string nor a list", ErrInvalidTokenizer)
	}
	for _, t := range list {
		if t.Name == "default" {
			v.ChatTemplate = t.Template
			continue
		}
		if v.NamedTemplates == nil {
			v.NamedTemplates = map[string]string{}
		}
		v.NamedTemplates[t.Name] = t.Template
	}
	return nil
}

// namedTemplateKeys returns NamedTemplates' names in a fixed order, so a
// file's bytes depend on its inputs only.
func (v *Vocab) namedTemplateKeys() []string {
	keys := make([]string, 0, len(v.NamedTemplates))
	for k := range v.NamedTemplates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tokenContent reads a token given as a string or as {"content": "..."}.
func tokenContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(raw, &obj)
	return obj.Content
}
