package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tokenizer turns text into the token ids a model's own Hugging Face
// tokenizer would produce, and back. It is safe for concurrent use.
type Tokenizer struct {
	model       *bpe
	norm        normalizer
	splitters   []splitter // applied in order; nil: a segment is one piece
	prefixSpace bool
	raw         *addedMatcher // added tokens matched on the input
	normed      *addedMatcher // added tokens matched after normalization
	added       map[uint32]*AddedToken
	byContent   map[string]*AddedToken
	spelling    [][]byte // raw bytes of each vocabulary id
	prefix      []uint32 // post-processor ids before a single sequence
	suffix      []uint32 // and after it
	vocabSize   int
	segs        segmentCache
	noSegCache  bool // benchmarks of the tokenizer itself turn the cache off

	// Config holds what tokenizer_config.json said.
	Config Config
	chat   *ChatTemplate
}

// Config is the part of tokenizer_config.json the router uses.
type Config struct {
	BOS, EOS       string
	ModelMaxLength int
	HasChat        bool
}

// LoadDir reads tokenizer.json and tokenizer_config.json (optional) from dir.
func LoadDir(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	return New(tj, cj)
}

// New builds a tokenizer from the contents of tokenizer.json and
// tokenizer_config.json (which may be empty). Every component is checked:
// anything this package cannot reproduce exactly is refused with
// ErrUnsupported and its name.
func New(tokenizerFile, configFile []byte) (*Tokenizer, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(tokenizerFile, &tj); err != nil {
		return nil, fmt.Errorf("%w: tokenizer.json: %v", ErrInvalid, err)
	}
	if s := strings.TrimSpace(string(tj.Truncation)); s != "" && s != "null" {
		return nil, unsupported("truncation %s (it would change the ids)", s)
	}
	if s := strings.TrimSpace(string(tj.Padding)); s != "" && s != "null" && !strings.Contains(s, "BatchLongest") {
		return nil, unsupported("padding %s", s)
	}
	t := &Tokenizer{added: map[uint32]*AddedToken{}, byContent: map[string]*AddedToken{}}
	var err error
	if t.model, err = newBPE(&tj.Model); err != nil {
		return nil, err
	}
	if t.norm, err = newNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if err = t.setPreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if err = checkDecoder(tj.Decoder); err != nil {
		return nil, err
	}
	var raw, normed []*AddedToken
	for _, a := range tj.AddedTokens {
		tok := &AddedToken{ID: a.ID, Content: a.Content, Special: a.Special, SingleWord: a.SingleWord,
			LStrip: a.LStrip, RStrip: a.RStrip, Normalized: a.Normalized}
		t.added[a.ID] = tok
		t.byContent[a.Content] = tok
		if a.Normalized && !a.Special {
			normed = append(normed, tok)
		} else {
			raw = append(raw, tok)
		}
	}
	t.raw, t.normed = newAddedMatcher(raw), newAddedMatcher(normed)
	if err = t.setPostProcessor(tj.PostProcessor); err != nil {
		return nil, err
	}
	t.buildSpellings(tj.Model.Vocab)
	if len(configFile) > 0 {
		if err := t.loadConfig(configFile); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *Tokenizer) setPreTokenizer(c *componentJSON) error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "Sequence":
		for _, sub := range c.PreTokenizers {
			if err := t.setPreTokenizer(sub); err != nil {
				return err
			}
		}
		return nil
	case "Split":
		if c.Invert || c.Behavior != "Isolated" {
			return unsupported("Split pre-tokenizer behavior %q invert %v (only Isolated)", c.Behavior, c.Invert)
		}
		if c.Pattern == nil || c.Pattern.Regex == nil {
			return unsupported("Split pre-tokenizer without a Regex pattern")
		}
		sp, ok := newSplitter(*c.Pattern.Regex)
		if !ok {
			return unsupported("Split regex %q (lookaround beyond the GPT-4 family patterns)", *c.Pattern.Regex)
		}
		t.splitters = append(t.splitters, sp)
		return nil
	case "ByteLevel":
		t.prefixSpace = c.AddPrefixSpace
		if c.UseRegex == nil || *c.UseRegex {
			t.splitters = append(t.splitters, gpt2Splitter{})
		}
		return nil
	}
	return unsupported("pre-tokenizer %q", c.Type)
}

func checkDecoder(c *componentJSON) error {
	if c == nil {
		return unsupported("no decoder (byte-level BPE needs ByteLevel)")
	}
	switch c.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		for _, d := range c.Decoders {
			if d.Type != "ByteLevel" {
				return unsupported("decoder %q in a Sequence", d.Type)
			}
		}
		return nil
	}
	return unsupported("decoder %q", c.Type)
}

func (t *Tokenizer) setPostProcessor(c *componentJSON) error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "ByteLevel":
		return nil // offsets only
	case "Sequence":
		for _, p := range c.Processors {
			if err := t.setPostProcessor(p); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
		seen := false
		for _, p := range c.Single {
			switch {
			case p.Sequence != nil:
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return fmt.Errorf("%w: template names special token %q it does not define", ErrInvalid, p.SpecialToken.ID)
				}
				if seen {
					t.suffix = append(t.suffix, st.IDs...)
				} else {
					t.prefix = append(t.prefix, st.IDs...)
				}
			}
		}
		return nil
	}
	return unsupported("post-processor %q", c.Type)
}

func (t *Tokenizer) buildSpellings(vocab map[string]uint32) {
	n := 0
	for _, id := range vocab {
		n = max(n, int(id)+1)
	}
	for id := range t.added {
		n = max(n, int(id)+1)
	}
	t.vocabSize = n
	t.spelling = make([][]byte, n)
	for s, id := range vocab {
		b, ok := appendRawBytes(nil, s)
		if !ok {
			b = []byte(s)
		}
		t.spelling[id] = b
	}
}

func (t *Tokenizer) loadConfig(b []byte) error {
	var c configJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%w: tokenizer_config.json: %v", ErrInvalid, err)
	}
	t.Config.BOS, t.Config.EOS = tokenString(c.BOSToken), tokenString(c.EOSToken)
	if c.ModelMaxLen > 0 && c.ModelMaxLen < 1<<31 {
		t.Config.ModelMaxLength = int(c.ModelMaxLen)
	}
	src, err := chatTemplateSource(c.ChatTemplate)
	if err != nil {
		return err
	}
	if src != "" {
		if t.chat, err = NewChatTemplate(src, t.Config.BOS, t.Config.EOS); err != nil {
			return err
		}
		t.Config.HasChat = true
	}
	return nil
}

// VocabSize returns one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of an added token by its text (e.g. "<|im_end|>").
func (t *Tokenizer) TokenID(content string) (uint32, bool) {
	if a, ok := t.byContent[content]; ok {
		return a.ID, true
	}
	return 0, false
}

// EOSID returns the id of the configured end-of-sequence token.
func (t *Tokenizer) EOSID() (uint32, bool) { return t.TokenID(t.Config.EOS) }

// Chat returns the chat template, or nil if the tokenizer has none.
func (t *Tokenizer) Chat() *ChatTemplate { return t.chat }

// Encode appends the ids of text to dst. Added tokens (special tokens such
// as <|im_start|> included) are recognised in the text; with addSpecial the
// post-processor's tokens (a BOS, for Llama 3) surround the result. Invalid
// UTF-8 is first replaced by U+FFFD, as decoding the bytes would. After
// warm-up it does not allocate when dst has room.
func (t *Tokenizer) Encode(dst []uint32, text string, addSpecial bool) []uint32 {
	text = toValidUTF8(text)
	if addSpecial {
		dst = append(dst, t.prefix...)
	}
	first := true
	for pos := 0; pos < len(text); {
		start, end, tok, ok := t.raw.find(text, pos)
		if !ok {
			dst = t.encodeSegment(dst, text[pos:], first)
			break
		}
		if start > pos {
			dst = t.encodeSegment(dst, text[pos:start], first)
		}
		dst = append(dst, tok.ID)
		first = false
		pos = end
	}
	if addSpecial {
		dst = append(dst, t.suffix...)
	}
	return dst
}

// encodeSegment encodes text that holds no raw added token.
func (t *Tokenizer) encodeSegment(dst []uint32, seg string, first bool) []uint32 {
	if len(seg) >= segmentCacheMin && !(first && t.prefixSpace) && !t.noSegCache {
		if ids, ok := t.segs.get(seg); ok {
			return append(dst, ids...)
		}
		start := len(dst)
		dst = t.encodeNormalized(dst, seg, first)
		t.segs.put(seg, dst[start:])
		return dst
	}
	return t.encodeNormalized(dst, seg, first)
}

func (t *Tokenizer) encodeNormalized(dst []uint32, seg string, first bool) []uint32 {
	if t.norm != nil {
		seg = t.norm.normalize(seg)
	}
	if first && t.prefixSpace && !strings.HasPrefix(seg, " ") {
		seg = " " + seg
	}
	for pos := 0; pos < len(seg); {
		start, end, tok, ok := t.normed.find(seg, pos)
		if !ok {
			return t.encodePieces(dst, seg[pos:], 0)
		}
		dst = t.encodePieces(dst, seg[pos:start], 0)
		dst = append(dst, tok.ID)
		pos = end
	}
	return dst
}

// encodePieces splits s with splitters[stage:] and runs BPE on each piece.
func (t *Tokenizer) encodePieces(dst []uint32, s string, stage int) []uint32 {
	if stage == len(t.splitters) {
		if s == "" {
			return dst
		}
		return t.model.encodePiece(dst, s)
	}
	sp := t.splitters[stage]
	for i := 0; i < len(s); {
		e := sp.next(s, i)
		dst = t.encodePieces(dst, s[i:e], stage+1)
		i = e
	}
	return dst
}

// Decode appends the bytes ids stand for; special added tokens are left out
// when skipSpecial. The bytes may end inside a UTF-8 sequence (see Stream).
func (t *Tokenizer) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	for _, id := range ids {
		if a, ok := t.added[id]; ok {
			if !(skipSpecial && a.Special) {
				dst = append(dst, a.Content...)
			}
			continue
		}
		if int(id) < len(t.spelling) {
			dst = append(dst, t.spelling[id]...)
		}
	}
	return dst
}

// DecodeString decodes ids to text, replacing invalid UTF-8 as Hugging Face
// does (errors="replace").
func (t *Tokenizer) DecodeString(ids []uint32, skipSpecial bool) string {
	return toValidUTF8(string(t.Decode(nil, ids, skipSpecial)))
}
