package wire

import (
	"errors"
	"testing"
)

// TestTokensDecodeHead: the fixed fields read in one piece (decodeHead)
// come out as encoded, a reserved byte set is refused, and a payload cut
// anywhere is refused as truncated.
func TestTokensDecodeHead(t *testing.T) {
	in := &TokensMsg{Flags: TokFirst | TokLast, Finish: FinishLength, CachedTokens: 0x01020304,
		PromptTokens: 0x05060708, CompletionTokens: 0x090a0b0c, Tokens: TokensOf([]uint32{7, 8}), Text: []byte("ab")}
	p, err := in.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var m TokensMsg
	if err := m.Decode(p, nil); err != nil {
		t.Fatal(err)
	}
	if m.Flags != in.Flags || m.Finish != in.Finish || m.CachedTokens != in.CachedTokens ||
		m.PromptTokens != in.PromptTokens || m.CompletionTokens != in.CompletionTokens ||
		m.Tokens.Len() != 2 || m.Tokens.At(1) != 8 || string(m.Text) != "ab" {
		t.Fatalf("decoded %+v from %+v", m, in)
	}
	for _, at := range []int{2, 3} {
		bad := append([]byte(nil), p...)
		bad[at] = 1
		if err := m.Decode(bad, nil); !errors.Is(err, ErrBadValue) {
			t.Fatalf("reserved byte %d set: %v, want ErrBadValue", at, err)
		}
	}
	for n := range len(p) {
		if err := m.Decode(p[:n], nil); !errors.Is(err, ErrTruncated) {
			t.Fatalf("payload cut at %d of %d bytes: %v, want ErrTruncated", n, len(p), err)
		}
	}
}
