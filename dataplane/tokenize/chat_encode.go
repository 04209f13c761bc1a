package tokenize

import (
	"fmt"
	"unicode/utf8"
)

// Incremental chat tokenization.
//
// A turn rendered from a remembered prefix (chat_incr.go) starts with the
// prefix's text, so most of its ids are the ids the previous turn
// computed. They are reused up to a cut where tokenizing the rest alone
// gives what tokenizing the whole would: just past an added token (Hugging
// Face splits the input at added tokens before anything else and encodes
// each piece on its own), far enough from the end of the prefix text that
// nothing that decides the matches before the cut reads a byte past it:
// the longest added token and a rune of lookahead fit between the cut and
// the end. Encode walks its input from one added token to the next; the
// cuts are points of that walk, the same in every text that starts with
// the prefix. Where a piece's first segment encodes differently from the
// same text later in the input (a prefix space, Metaspace's "first") or a
// single_word added token looks behind the cut, nothing is reused.

// prefixIDs are the ids of a prefix text's first cut bytes, attached to
// the prefix by the tokenizer tok.
type prefixIDs struct {
	tok   *Tokenizer
	ids   []uint32
	cut   int
	grown growth // who extends ids' array in place (chat_grow.go)
}

// ChatPrompt is a rendered conversation on its way to token ids.
type ChatPrompt struct {
	// Text is the rendered prompt.
	Text   string
	tok    *Tokenizer
	r      chatRender
	reused int
}

// Reused is how many of Encode's leading ids it took from the turn the
// prompt continues: a caller that keeps what it derived from those ids
// (block hashes, say) for that turn may extend it from there.
func (p *ChatPrompt) Reused() int { return p.reused }

// RenderChat renders the conversation with the tokenizer's chat template;
// Encode then tokenizes it. It is safe for concurrent use.
func (t *Tokenizer) RenderChat(in *ChatInput) (*ChatPrompt, error) {
	if t.chat == nil {
		return nil, fmt.Errorf("%w: the tokenizer has no chat template", ErrUnsupported)
	}
	r, err := t.chat.render(in)
	if err != nil {
		return nil, err
	}
	return &ChatPrompt{Text: r.text, tok: t, r: r}, nil
}

// EncodeChat renders the conversation and tokenizes it with added tokens
// recognised and no post-processor tokens (the template writes its own BOS),
// as vLLM's chat endpoint does.
func (t *Tokenizer) EncodeChat(dst []uint32, in *ChatInput) ([]uint32, string, error) {
	p, err := t.RenderChat(in)
	if err != nil {
		return dst, "", err
	}
	return p.Encode(dst), p.Text, nil
}

// Encode appends the ids of the prompt to dst: exactly Tokenizer.Encode
// of Text without special tokens, reusing the ids of the turn it continues
// where it can, and leaving its own for the next turn.
func (p *ChatPrompt) Encode(dst []uint32) []uint32 {
	t, text := p.tok, p.Text
	var reuse *prefixIDs
	if p.r.from != nil {
		if e := p.r.from.ids.Load(); e != nil && e.tok == t && utf8.ValidString(text[e.cut:]) {
			reuse = e
		}
	}
	next := p.r.next
	if reuse == nil && (next == nil || !t.cutsReusable() || !utf8.ValidString(text)) {
		return t.Encode(dst, text, false)
	}
	base, from := len(dst), 0
	if reuse != nil {
		dst, from, p.reused = append(dst, reuse.ids...), reuse.cut, len(reuse.ids)
	}
	cut := from
	if next != nil {
		cut = t.lastCut(text, from, len(next.text))
	}
	if cut > from {
		dst = t.Encode(dst, text[from:cut], false)
		var have []uint32
		var g *growth
		if reuse != nil {
			have, g = reuse.ids, &reuse.grown
		}
		ids, owns := grow(g, have, dst[base+len(have):])
		e := &prefixIDs{tok: t, ids: ids, cut: cut}
		e.grown.init(owns, 0)
		p.tok.chat.prefixes.attach(next, e)
	} else if next != nil && reuse != nil {
		p.tok.chat.prefixes.attach(next, reuse) // its cut is one of next's too
	}
	return t.Encode(dst, text[cut:], false)
}

// cutsReusable reports whether tokenizing from a cut on gives what the
// whole text's tokenization gives there: the first segment of an input
// encodes as any other, and no added token looks at the word before it.
func (t *Tokenizer) cutsReusable() bool {
	return !t.firstDiffers && t.chat.addedInfo(t).ok
}

// lastCut returns the last point of Encode's walk over text from from (a
// point of it) that is an added token's end, with the longest added token
// and a rune between it and limit; from when there is none.
func (t *Tokenizer) lastCut(text string, from, limit int) int {
	room := limit - t.chat.addedInfo(t).longest - utf8.UTFMax
	cut := from
	for pos := from; pos <= room; {
		_, end, _, ok := t.raw.find(text, pos)
		if !ok || end > room {
			break
		}
		cut, pos = end, end
	}
	return cut
}

// addedFacts are what the cuts need to know of a tokenizer's added
// tokens: the longest one's length, and ok when none is single_word.
type addedFacts struct {
	tok     *Tokenizer
	longest int
	ok      bool
}

// addedInfo returns tok's addedFacts, computed once per template (a
// template serves one tokenizer).
func (c *ChatTemplate) addedInfo(tok *Tokenizer) *addedFacts {
	if f := c.added.Load(); f != nil && f.tok == tok {
		return f
	}
	f := &addedFacts{tok: tok, ok: true}
	for _, list := range tok.raw.byFirst {
		for _, a := range list {
			f.longest = max(f.longest, len(a.Content))
			f.ok = f.ok && !a.SingleWord
		}
	}
	c.added.Store(f)
	return f
}
