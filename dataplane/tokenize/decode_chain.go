package tokenize

import (
	"strings"
	"unicode/utf8"
)

// decodeChain is a SentencePiece-style decoder: tokens' strings pass
// through each step in turn, as a list (a step may join or split them),
// and the result is their concatenation, as in tokenizers'
// Decoder::decode (src/tokenizer/mod.rs, 3ba8ad0). With no decoder at all
// tokenizers joins the tokens with spaces.
type decodeChain struct {
	steps []decodeStep
	none  bool // no decoder: join with " "
}

type decodeStep interface {
	apply(tokens []string) []string
}

func newDecodeChain(c *componentJSON) (*decodeChain, error) {
	d := &decodeChain{}
	if c == nil {
		d.none = true
		return d, nil
	}
	return d, d.add(c)
}

func (d *decodeChain) add(c *componentJSON) error {
	switch c.Type {
	case "Sequence":
		for _, sub := range c.Decoders {
			if err := d.add(sub); err != nil {
				return err
			}
		}
		return nil
	case "Replace":
		old, err := literalPattern("Replace decoder", c.Pattern)
		if err != nil {
			return err
		}
		if c.Content == nil {
			return unsupported("decoder Replace without content")
		}
		d.steps = append(d.steps, replaceStep{old: old, new: *c.Content})
	case "ByteFallback":
		d.steps = append(d.steps, byteFallbackStep{})
	case "Fuse":
		d.steps = append(d.steps, fuseStep{})
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 || c.Start < 0 || c.Stop < 0 {
			return unsupported("decoder Strip without a one-character content")
		}
		d.steps = append(d.steps, stripStep{content: *c.Content, start: c.Start, stop: c.Stop})
	case "Metaspace":
		m, err := newMetaspace(c)
		if err != nil {
			return err
		}
		d.steps = append(d.steps, metaspaceStep{repl: m.repl, dropFirst: m.prepend != prependNever})
	case "ByteLevel":
		return unsupported("decoder ByteLevel without a ByteLevel pre-tokenizer")
	default:
		return unsupported("decoder %q", c.Type)
	}
	return nil
}

// decode returns the text of tokens.
func (d *decodeChain) decode(tokens []string) string {
	if d.none {
		return strings.Join(tokens, " ")
	}
	for _, s := range d.steps {
		tokens = s.apply(tokens)
	}
	return strings.Join(tokens, "")
}

// replaceStep replaces a literal in each token (decoders/replace.rs).
type replaceStep struct{ old, new string }

func (r replaceStep) apply(tokens []string) []string {
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(t, r.old, r.new)
	}
	return tokens
}

// byteFallbackStep turns each run of <0xNN> tokens into the text of its
// bytes: the run's UTF-8, or one U+FFFD per byte if the run as a whole is
// not valid UTF-8 (decoders/byte_fallback.rs).
type byteFallbackStep struct{}

func (byteFallbackStep) apply(tokens []string) []string {
	out := tokens[:0:0]
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range tokens {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// byteToken reads a token spelled <0xNN>, NN as u8::from_str_radix reads
// two characters: hex digits of either case, or a plus sign and one digit.
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || t[:3] != "<0x" || t[5] != '>' {
		return 0, false
	}
	if t[3] == '+' {
		return hexDigit(t[4])
	}
	hi, ok1 := hexDigit(t[3])
	lo, ok2 := hexDigit(t[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// fuseStep joins all tokens into one (decoders/fuse.rs).
type fuseStep struct{}

func (fuseStep) apply(tokens []string) []string { return []string{strings.Join(tokens, "")} }

// stripStep removes up to start leading and stop trailing content
// characters from each token (decoders/strip.rs).
type stripStep struct {
	content     string
	start, stop int
}

func (s stripStep) apply(tokens []string) []string {
	for i, t := range tokens {
		for k := 0; k < s.start && strings.HasPrefix(t, s.content); k++ {
			t = t[len(s.content):]
		}
		for k := 0; k < s.stop && strings.HasSuffix(t, s.content); k++ {
			t = t[:len(t)-len(s.content)]
		}
		tokens[i] = t
	}
	return tokens
}

// metaspaceStep turns the replacement character back into spaces, except
// in the first token, where it is dropped unless the prepend scheme is
// never (pre_tokenizers/metaspace.rs).
type metaspaceStep struct {
	repl      string
	dropFirst bool
}

func (m metaspaceStep) apply(tokens []string) []string {
	for i, t := range tokens {
		if i == 0 && m.dropFirst {
			tokens[i] = strings.ReplaceAll(t, m.repl, "")
		} else {
			tokens[i] = strings.ReplaceAll(t, m.repl, " ")
		}
	}
	return tokens
}

// Decode appends the text of ids; special added tokens are left out when
// skipSpecial. For a byte-level tokenizer it is the bytes the ids stand
// for, which may end inside a UTF-8 sequence (see Stream); otherwise the
// text the tokenizer's decoder gives for the ids together.
func (t *Tokenizer) Decode(dst []byte, ids []uint32, skipSpecial bool) []byte {
	if t.dec != nil {
		return append(dst, t.decodeChain(ids, skipSpecial)...)
	}
	dst, _ = t.bytes().appendIDs(dst, ids, skipSpecial)
	return dst
}

// decodeChain runs a SentencePiece-style decoder over the ids' tokens;
// ids outside the vocabulary are skipped, as tokenizers skips them.
func (t *Tokenizer) decodeChain(ids []uint32, skipSpecial bool) string {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if a, ok := t.added[id]; ok {
			if !(skipSpecial && a.Special) {
				tokens = append(tokens, a.Content)
			}
			continue
		}
		if int(id) < len(t.spelling) && t.spelling[id] != nil {
			tokens = append(tokens, string(t.spelling[id]))
		}
	}
	return t.dec.decode(tokens)
}

// DecodeString decodes ids to text, replacing invalid UTF-8 as Hugging Face
// does (errors="replace").
func (t *Tokenizer) DecodeString(ids []uint32, skipSpecial bool) string {
	if t.dec != nil {
		return t.decodeChain(ids, skipSpecial)
	}
	return toValidUTF8(string(t.Decode(nil, ids, skipSpecial)))
}

// checkDecoder accepts the decoder of a byte-level tokenizer, which
// Decode implements by the byte alphabet.
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
