package wire

import (
	"encoding/binary"
	"fmt"
)

// TokensFlags mark a TOKENS frame's place in its stream.
type TokensFlags uint8

// TOKENS flags.
const (
	TokFirst   TokensFlags = 1 << 0 // first frame of the stream: CachedTokens is valid
	TokLast    TokensFlags = 1 << 1 // last frame: Finish and usage are valid
	tokDefined             = TokFirst | TokLast | TokLogprobs | TokTextSpans | TokHandoff
)

// FinishReason says why generation ended.
type FinishReason uint8

// Finish reasons.
const (
	FinishNone      FinishReason = 0 // not the last frame
	FinishStop      FinishReason = 1 // EOS or a stop token
	FinishLength    FinishReason = 2 // max_tokens or the context limit
	FinishCancelled FinishReason = 3 // CANCEL received
	FinishAbort     FinishReason = 4 // the engine aborted the request
	finishMax                    = FinishAbort
)

var finishNames = [...]string{"none", "stop", "length", "cancelled", "abort"}

// String returns the reason's name.
func (f FinishReason) String() string {
	if int(f) < len(finishNames) {
		return finishNames[f]
	}
	return fmt.Sprintf("finish_%d", uint8(f))
}

// TokensMsg carries generated token ids of one stream. Decoding does not
// allocate: Tokens and Text are views into the payload.
//
//	| flags u8 | finish_reason u8 | reserved u16 | cached_tokens u32 |
//	| prompt_tokens u32 | completion_tokens u32 |
//	| tokens: u32 n, u32 x n | text: u32 n, bytes |
//	| text ends (flag TokTextSpans only): u32 n, u32 x n |
//	| logprobs (flag TokLogprobs only): see Logprobs |
//	| kv_transfer (flag TokHandoff only): u32 n, bytes (disagg.go) |
//
// Without FeatureTokenBatch a frame holds one decode step's tokens; with
// it, several steps' (tokens_batch.go).
type TokensMsg struct {
	Flags  TokensFlags
	Finish FinishReason
	// CachedTokens (first frame) is how many prompt tokens were served from cache.
	// A last frame may carry it too, from an engine that learns it only at the
	// end; non-zero there, it replaces the first frame's.
	CachedTokens uint32
	// PromptTokens and CompletionTokens (last frame) are the request's usage.
	PromptTokens     uint32
	CompletionTokens uint32
	Tokens           Tokens
	// Text is the detokenized text of Tokens, when the router asked for it.
	Text []byte
	// TextEnds (flag TokTextSpans) split Text by token, one end each.
	TextEnds TextEnds
	// Logprobs (flag TokLogprobs) are Tokens' logprobs, one entry each.
	Logprobs Logprobs
	// KVTransfer (flag TokHandoff) is the prefill engine's opaque transfer
	// parameters, for the decode GENERATE's kv_transfer.
	KVTransfer []byte
}

// Type implements Message.
func (*TokensMsg) Type() Type { return TypeTokens }

// First reports whether this is the stream's first frame.
func (m *TokensMsg) First() bool { return m.Flags&TokFirst != 0 }

// Last reports whether this is the stream's last frame.
func (m *TokensMsg) Last() bool { return m.Flags&TokLast != 0 }

// AppendPayload implements Message.
func (m *TokensMsg) AppendPayload(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.u8(uint8(m.Flags))
	e.u8(uint8(m.Finish))
	e.zero(2)
	e.u32(m.CachedTokens)
	e.u32(m.PromptTokens)
	e.u32(m.CompletionTokens)
	e.tokens(m.Tokens)
	e.bytes32(m.Text, "text")
	if m.Flags&TokTextSpans != 0 {
		e.textEnds(m.TextEnds, m.Tokens.Len(), m.Text)
	}
	if m.Flags&TokLogprobs != 0 {
		m.Logprobs.append(&e, m.Tokens.Len())
	}
	if m.Flags&TokHandoff != 0 {
		m.appendKVTransfer(&e)
	}
	return e.b, e.err
}

// Decode implements Message.
func (m *TokensMsg) Decode(p []byte, lim *Limits) error {
	lim = limitsOrDefault(lim)
	c := cursor{b: p}
	m.decodeHead(&c)
	m.Tokens = c.tokens(lim.MaxTokens, "tokens")
	m.Text = c.bytes32("text")
	m.TextEnds = TextEnds{}
	if m.Flags&TokTextSpans != 0 {
		m.TextEnds = decodeTextEnds(&c, m.Tokens.Len(), len(m.Text))
	}
	m.Logprobs = Logprobs{}
	if m.Flags&TokLogprobs != 0 {
		m.Logprobs = decodeLogprobs(&c, m.Tokens.Len())
	}
	m.KVTransfer = nil
	if m.Flags&TokHandoff != 0 {
		m.decodeKVTransfer(&c)
	}
	if err := c.done("TOKENS"); err != nil {
		return err
	}
	switch {
	case m.Flags&^tokDefined != 0:
		return fmt.Errorf("decoding TOKENS: flags %#x: %w", uint8(m.Flags), ErrBadValue)
	case m.Finish > finishMax:
		return fmt.Errorf("decoding TOKENS: finish reason %d: %w", m.Finish, ErrBadValue)
	case m.Last() != (m.Finish != FinishNone):
		return fmt.Errorf("decoding TOKENS: finish reason %s with last=%v: %w",
			m.Finish, m.Last(), ErrBadValue)
	}
	return nil
}

// tokensHeadSize is the size of a TOKENS payload's fixed fields, before its
// tokens.
const tokensHeadSize = 16

// decodeHead reads the fixed fields with one bounds check for them all:
// every frame of every stream is read here.
func (m *TokensMsg) decodeHead(c *cursor) {
	h := c.take(tokensHeadSize, "TOKENS fields")
	if len(h) < tokensHeadSize {
		m.Flags, m.Finish, m.CachedTokens, m.PromptTokens, m.CompletionTokens = 0, 0, 0, 0, 0
		return
	}
	m.Flags, m.Finish = TokensFlags(h[0]), FinishReason(h[1])
	if h[2]|h[3] != 0 {
		c.err = fmt.Errorf("decoding reserved at byte 2: must be zero: %w", ErrBadValue)
	}
	m.CachedTokens = binary.LittleEndian.Uint32(h[4:])
	m.PromptTokens = binary.LittleEndian.Uint32(h[8:])
	m.CompletionTokens = binary.LittleEndian.Uint32(h[12:])
}
