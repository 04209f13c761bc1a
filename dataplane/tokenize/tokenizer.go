package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Tokenizer turns text into the token ids a model's own Hugging Face
// tokenizer would produce, and back. It is safe for concurrent use.
type Tokenizer struct {
	model       *bpe     // the BPE model, or nil for Unigram
	uni         *unigram // the Unigram model, or nil for BPE
	vocab       *vocabTable
	norm        normalizer
	splitters   []splitter // applied in order; nil: a segment is one piece
	meta        *metaspace // SentencePiece's pre-tokenizer, after the splitters
	prefixSpace bool
	// firstDiffers: the input's first segment encodes differently from
	// the same text elsewhere (a prefix space or Metaspace's "first").
	firstDiffers bool
	dec          *decodeChain  // nil: byte-level decoding
	raw          *addedMatcher // added tokens matched on the input
	normed       *addedMatcher // added tokens matched after normalization
	added        map[uint32]*AddedToken
	byContent    map[string]*AddedToken
	spelling     [][]byte // raw bytes of each vocabulary id (byte-level), its string otherwise
	prefix       []uint32 // post-processor ids before a single sequence
	suffix       []uint32 // and after it
	vocabSize    int
	segs         segmentCache
	noSegCache   bool // benchmarks of the tokenizer itself turn the cache off

	// Config holds what tokenizer_config.json said.
	Config Config
	chat   *ChatTemplate

	table     byteTable // byte-level decoding laid flat (decode_table.go), built once
	tableOnce sync.Once
}

// Config is the part of tokenizer_config.json the router uses.
type Config struct {
	BOS, EOS       string
	ModelMaxLength int
	HasChat        bool
}

// LoadDir reads tokenizer.json, tokenizer_config.json (optional) and
// chat_template.jinja (optional) from dir. As in transformers, a
// chat_template.jinja takes priority over the chat_template in
// tokenizer_config.json ("If independent chat template file(s) exist, they
// take priority over template entries in the tokenizer config":
// PreTrainedTokenizerBase._from_pretrained in
// src/transformers/tokenization_utils_base.py, and
// test_chat_template_file_priority in tests/test_tokenization_common.py).
func LoadDir(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	jinja, err := os.ReadFile(filepath.Join(dir, ChatTemplateFile))
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	return NewWithChatTemplate(tj, cj, string(jinja))
}

// ChatTemplateFile is the name of the chat template file beside
// tokenizer_config.json that transformers reads (CHAT_TEMPLATE_FILE).
const ChatTemplateFile = "chat_template.jinja"

// New builds a tokenizer from the contents of tokenizer.json and
// tokenizer_config.json (which may be empty). Every component is checked:
// anything this package cannot reproduce exactly is refused with
// ErrUnsupported and its name.
func New(tokenizerFile, configFile []byte) (*Tokenizer, error) {
	return NewWithChatTemplate(tokenizerFile, configFile, "")
}

// NewWithChatTemplate is New with the contents of chat_template.jinja:
// when not empty it is the chat template, whatever tokenizer_config.json
// says (see LoadDir).
func NewWithChatTemplate(tokenizerFile, configFile []byte, chatTemplate string) (*Tokenizer, error) {
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
	byteLevel := hasByteLevel(tj.PreTokenizer)
	switch {
	case tj.Model.Type == "Unigram" && byteLevel:
		return nil, unsupported("Unigram model behind a ByteLevel pre-tokenizer")
	case tj.Model.Type == "Unigram":
		if t.uni, err = newUnigram(&tj.Model); err != nil {
			return nil, err
		}
		t.vocab = t.uni.vocab
	default:
		if t.model, err = newBPE(&tj.Model, byteLevel); err != nil {
			return nil, err
		}
		t.vocab = t.model.vocab
	}
	if t.norm, err = newNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if err = t.setPreTokenizer(tj.PreTokenizer); err != nil {
		return nil, err
	}
	t.firstDiffers = t.prefixSpace || t.meta != nil && t.meta.prepend == prependFirst
	if byteLevel {
		err = checkDecoder(tj.Decoder)
	} else {
		t.dec, err = newDecodeChain(tj.Decoder)
	}
	if err != nil {
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
	t.buildSpellings(t.vocab)
	if len(configFile) > 0 {
		if err := t.loadConfig(configFile); err != nil {
			return nil, err
		}
	}
	if chatTemplate != "" {
		if err := t.setChatTemplate(chatTemplate); err != nil {
			return nil, err
		}
	}
	return t, nil
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

func (t *Tokenizer) buildSpellings(vocab *vocabTable) {
	n := 0
	for _, id := range vocab.all() {
		n = max(n, int(id)+1)
	}
	for id := range t.added {
		n = max(n, int(id)+1)
	}
	t.vocabSize = n
	t.spelling = make([][]byte, n)
	// One array holds every spelling, not an allocation each: a spelling's
	// raw bytes are never longer than it, so the array never moves.
	size := 0
	for s := range vocab.all() {
		size += len(s)
	}
	text := make([]byte, 0, size)
	for s, id := range vocab.all() {
		start := len(text)
		var ok bool
		text, ok = appendRawBytes(text, s)
		whole := !ok || t.dec != nil
		if whole {
			text = append(text[:start], s...)
		}
		if len(text) == start && !whole {
			t.spelling[id] = nil // as appendRawBytes(nil, "") gives
			continue
		}
		t.spelling[id] = text[start:len(text):len(text)]
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
	if err := t.classPostProcessor(&c); err != nil {
		return err
	}
	src, err := chatTemplateSource(c.ChatTemplate)
	if err != nil {
		return err
	}
	if src != "" {
		return t.setChatTemplate(src)
	}
	return nil
}

func (t *Tokenizer) setChatTemplate(src string) error {
	var err error
	if t.chat, err = NewChatTemplate(src, t.Config.BOS, t.Config.EOS); err != nil {
		return err
	}
	t.Config.HasChat = true
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

// VocabID returns the id of a token of the model's vocabulary by its
// spelling there (for SentencePiece-style models "▁the" or "<0x0A>").
func (t *Tokenizer) VocabID(token string) (uint32, bool) {
	return t.vocab.get(token)
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
	var a *textArena
	if t.dec != nil { // SentencePiece-style rewrites build text
		a = getArena()
		defer a.release()
	}
	first := true
	for pos := 0; pos < len(text); {
		start, end, tok, ok := t.raw.find(text, pos)
		if !ok {
			dst = t.encodeSegment(dst, text[pos:], first, a)
			break
		}
		if start > pos {
			dst = t.encodeSegment(dst, text[pos:start], first, a)
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

// encodeSegment encodes text that holds no raw added token; first: it
// starts the input.
func (t *Tokenizer) encodeSegment(dst []uint32, seg string, first bool, a *textArena) []uint32 {
	if len(seg) >= segmentCacheMin && !(first && t.firstDiffers) && !t.noSegCache {
		if ids, ok := t.segs.get(seg); ok {
			return append(dst, ids...)
		}
		start := len(dst)
		dst = t.encodeNormalized(dst, seg, first, a)
		t.segs.put(seg, dst[start:])
		return dst
	}
	return t.encodeNormalized(dst, seg, first, a)
}

func (t *Tokenizer) encodeNormalized(dst []uint32, seg string, first bool, a *textArena) []uint32 {
	if t.norm != nil {
		seg = t.norm.normalize(seg, a)
	}
	if first && t.prefixSpace && !strings.HasPrefix(seg, " ") {
		seg = " " + seg
	}
	for pos := 0; pos < len(seg); {
		start, end, tok, ok := t.normed.find(seg, pos)
		if !ok {
			return t.encodePieces(dst, seg[pos:], 0, first && pos == 0, a)
		}
		dst = t.encodePieces(dst, seg[pos:start], 0, first && pos == 0, a)
		dst = append(dst, tok.ID)
		pos = end
	}
	return dst
}

// encodePieces splits s with splitters[stage:] and runs BPE on each piece
// (after Metaspace, if the tokenizer has it); atStart: s begins the input.
func (t *Tokenizer) encodePieces(dst []uint32, s string, stage int, atStart bool, a *textArena) []uint32 {
	if stage == len(t.splitters) {
		if s == "" {
			return dst
		}
		if t.meta != nil {
			return t.encodeMetaspace(dst, s, atStart, a)
		}
		return t.encodeWord(dst, s)
	}
	sp := t.splitters[stage]
	// The last splitter's pieces (never empty) go straight to the model
	// when no Metaspace rewrites them: one call a piece, not two.
	words := stage == len(t.splitters)-1 && t.meta == nil
	for i := 0; i < len(s); {
		e := sp.next(s, i)
		if words {
			dst = t.encodeWord(dst, s[i:e])
		} else {
			dst = t.encodePieces(dst, s[i:e], stage+1, atStart && i == 0, a)
		}
		i = e
	}
	return dst
}

// encodeWord runs the model on one pre-token.
func (t *Tokenizer) encodeWord(dst []uint32, s string) []uint32 {
	if t.uni != nil {
		return t.uni.encodePiece(dst, s)
	}
	return t.model.encodePiece(dst, s)
}

// encodeMetaspace rewrites a piece as Metaspace does and encodes its words.
func (t *Tokenizer) encodeMetaspace(dst []uint32, s string, atStart bool, a *textArena) []uint32 {
	s = t.meta.rewrite(s, atStart, a)
	if !t.meta.split {
		return t.encodeWord(dst, s)
	}
	for i := 0; i < len(s); {
		e := t.meta.nextWord(s, i)
		dst = t.encodeWord(dst, s[i:e])
		i = e
	}
	return dst
}
