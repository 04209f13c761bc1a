package llamacpp

import (
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// llama.cpp's stream leaves out the ids of some tokens. process_token
// (tools/server/server-context.cpp at 80fb11ac) sends no event for a token
// after which the generated text ends inside a UTF-8 sequence, as
// validate_utf8 judges it: a lead byte among the last four bytes with
// fewer bytes after it than its sequence needs. The event of the token
// that completes the character carries only that token, its content the
// text of all of them. So an event says k = tokens_predicted - (ids seen)
// - len(tokens) ids were left out, and its content, less the completing
// token's own piece, is their bytes: the ids are k vocabulary pieces that
// spell those bytes, each leaving the text incomplete.
//
// That is one answer when k is 1 (pieces are unique byte strings) and
// usually when k is more; when several spellings fit, the bridge takes
// one (the text routers decode is the same either way, the ids may not
// be the server's) and counts it as guessed. Tokens left out at the end
// of generation have no event after them and no content anywhere in the
// stream: the bridge cannot know them and counts them as lost; usage
// still counts them (tokens_predicted).

// Pieces indexes a tokenizer's vocabulary by the bytes of each piece, for
// recovering ids from text. It is read-only once built.
type Pieces struct {
	tok     *tokenize.Tokenizer
	byBytes map[string]uint32 // piece -> id; ambiguous pieces are absent
	maxLen  int
}

// NewPieces indexes tok's vocabulary: every id whose piece is not empty
// and not a special token's (special tokens never leave text incomplete).
func NewPieces(tok *tokenize.Tokenizer) *Pieces {
	p := &Pieces{tok: tok, byBytes: make(map[string]uint32, tok.VocabSize())}
	dup := map[string]bool{}
	var buf []byte
	for id := range uint32(tok.VocabSize()) {
		buf = tok.Decode(buf[:0], []uint32{id}, true)
		if len(buf) == 0 {
			continue
		}
		s := string(buf)
		if _, seen := p.byBytes[s]; seen || dup[s] {
			delete(p.byBytes, s)
			dup[s] = true
			continue
		}
		p.byBytes[s] = id
		p.maxLen = max(p.maxLen, len(s))
	}
	return p
}

// Recovery bounds: beyond them an event's gap is counted as lost.
const (
	maxRecoverTokens = 64
	maxRecoverBytes  = 4096
)

// Recover finds the k ids left out before an event: text is the event's
// content less the completing tokens' pieces, tail the last bytes (up to
// 3) of the text streamed before it. It appends them to dst; exact is
// false when more than one spelling fits, ok false when none does.
func (p *Pieces) Recover(dst []uint32, tail, text []byte, k int) (out []uint32, exact, ok bool) {
	n := len(text)
	if k <= 0 || k > maxRecoverTokens || n == 0 || n > maxRecoverBytes {
		return dst, false, false
	}
	buf := append(append(make([]byte, 0, len(tail)+n), tail...), text...)
	incompleteAt := func(j int) bool { return utf8Incomplete(buf[:len(tail)+j]) }
	// ways[c][j]: spellings (2 meaning two or more) of text[:j] in c
	// pieces, each leaving the text incomplete.
	ways := make([][]uint8, k+1)
	for c := range ways {
		ways[c] = make([]uint8, n+1)
	}
	ways[0][0] = 1
	for c := range k {
		for j := 0; j < n; j++ {
			if ways[c][j] == 0 {
				continue
			}
			for l := 1; l <= p.maxLen && j+l <= n; l++ {
				if _, found := p.byBytes[string(text[j:j+l])]; found && incompleteAt(j+l) {
					ways[c+1][j+l] = min(2, ways[c+1][j+l]+ways[c][j])
				}
			}
		}
	}
	if ways[k][n] == 0 {
		return dst, false, false
	}
	ids := make([]uint32, k)
	for c, j := k, n; c > 0; c-- { // walk back, the longest last piece first
		for l := min(p.maxLen, j); l >= 1; l-- {
			if id, found := p.byBytes[string(text[j-l:j])]; found && ways[c-1][j-l] > 0 && incompleteAt(j) {
				ids[c-1], j = id, j-l
				break
			}
		}
	}
	return append(dst, ids...), ways[k][n] == 1, true
}

// Spell appends the pieces of ids: special tokens left out (as llama.cpp
// renders them in a completion's content unless it was told otherwise)
// or spelled.
func (p *Pieces) Spell(dst []byte, ids []uint32, specials bool) []byte {
	return p.tok.Decode(dst, ids, !specials)
}

// utf8Incomplete is llama.cpp's validate_utf8(text) < len(text): the text
// ends inside a multi-byte sequence, judged by the last lead byte among
// the last four bytes only (continuation bytes are not checked).
func utf8Incomplete(text []byte) bool {
	for i := 1; i <= 4 && i <= len(text); i++ {
		c := text[len(text)-i]
		switch {
		case c&0xE0 == 0xC0:
			if i < 2 {
				return true
			}
		case c&0xF0 == 0xE0:
			if i < 3 {
				return true
			}
		case c&0xF8 == 0xF0:
			if i < 4 {
				return true
			}
		}
	}
	return false
}
