package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/wire"
)

// TestEngineErrors: which engine failures before the first token are
// retried elsewhere, and what the client gets for the rest.
func TestEngineErrors(t *testing.T) {
	remote := func(c wire.ErrorCode) error {
		return fmt.Errorf("stream: %w", &wire.RemoteError{Code: c, Message: "why"})
	}
	cases := []struct {
		name   string
		err    error
		retry  bool
		status int
	}{
		{"engine down", engine.ErrEngineDown, true, 502},
		{"engine not ready", engine.ErrNotReady, true, 502},
		{"refused before sending", fmt.Errorf("engine a: GENERATE stop_token_ids: why: %w", wire.ErrLimit), false, 400},
		{"frame refused before sending", fmt.Errorf("engine a: GENERATE why: %w", wire.ErrFrameTooLarge), false, 400},
		{"overloaded", remote(wire.CodeOverloaded), true, 502},
		{"stream limit", remote(wire.CodeStreamLimit), true, 502},
		{"bad request", remote(wire.CodeBadRequest), false, 400},
		{"over a limit", remote(wire.CodeLimit), false, 400},
		{"frame too large", remote(wire.CodeFrameTooLarge), false, 400},
		{"unknown model", remote(wire.CodeUnknownModel), false, 502},
		{"stream failed", remote(wire.CodeStreamFailed), false, 502},
		{"other", errors.New("boom"), false, 502},
	}
	for _, c := range cases {
		if got := retryable(c.err); got != c.retry {
			t.Errorf("%s: retryable %v", c.name, got)
		}
		if c.retry {
			continue
		}
		if e := engineError(c.err); e.Status != c.status || !strings.Contains(e.Message, "why") && c.name != "other" {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
}

// TestEncodeBounded: under the limit the ids are the tokenizer's own for
// the whole text, however long; over it the count stops after a window,
// and counting by windows cut before a space agrees with the whole.
func TestEncodeBounded(t *testing.T) {
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; b.Len() < 600<<10; i++ {
		fmt.Fprintf(&b, "Sentence %d says something about item %d, then stops.\n", i, i*7)
	}
	text := b.String()
	whole := tok.Encode(nil, text, true)
	got, over, _ := encodeBounded(nil, tok, text, true, len(whole)+10)
	if over || !slices.Equal(got, whole) {
		t.Fatalf("under the limit: over %v, %d ids, want %d", over, len(got), len(whole))
	}
	_, over, counted := encodeBounded(nil, tok, text, true, 1000)
	if !over || counted <= 1000 || counted > len(whole)/4 {
		t.Fatalf("over the limit: over %v after counting %d of %d", over, counted, len(whole))
	}
	windowed := 0
	for pos := 0; pos < len(text); {
		end := cutWindow(text, pos)
		windowed += len(tok.Encode(nil, text[pos:end], false))
		pos = end
	}
	if d := windowed - (len(whole) - len(tok.Encode(nil, "", true))); d < -windowSlack || d > windowSlack {
		t.Fatalf("windowed count %d, whole %d", windowed, len(whole))
	}
}
