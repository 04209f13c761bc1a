package wire

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestTruncatedPayloads cuts every golden payload at every length short of
// whole: each cut must fail with ErrTruncated (or a value error for fields
// that became inconsistent), never panic and never succeed. RING is left
// out: its body is opaque to wire (syncring checks its own layout).
func TestTruncatedPayloads(t *testing.T) {
	for _, c := range goldenCases() {
		if c.msg.Type() == TypeRing {
			continue
		}
		payload, err := c.msg.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(payload); n++ {
			m := NewMessage(c.msg.Type())
			err := m.Decode(payload[:n], nil)
			if err == nil {
				t.Fatalf("%s cut at %d of %d: decoded without error", c.name, n, len(payload))
			}
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrVersion) {
				t.Fatalf("%s cut at %d: %v", c.name, n, err)
			}
		}
		m := NewMessage(c.msg.Type())
		if err := m.Decode(append(payload, 0), nil); !errors.Is(err, ErrTrailingBytes) {
			t.Fatalf("%s with a trailing byte: got %v", c.name, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxTokens = 4
	lim.MaxEvents = 2
	enc := func(m Message) []byte {
		b, err := m.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	gen := func(mod func(*Generate)) []byte {
		g := &Generate{Model: []byte("m"), TopP: 1, Prompt: TokensOf([]uint32{1, 2})}
		mod(g)
		return enc(g)
	}
	removed := Event{Kind: EventRemoved, Hashes: HashesOf([]uint64{1})}
	tests := []struct {
		name    string
		msg     Message
		payload []byte
		want    error
	}{
		{"prompt over MaxTokens", &Generate{}, gen(func(g *Generate) { g.Prompt = TokensOf([]uint32{1, 2, 3, 4, 5}) }), ErrLimit},
		{"empty prompt", &Generate{}, gen(func(g *Generate) { g.Prompt = Tokens{} }), ErrBadValue},
		{"NaN temperature", &Generate{}, gen(func(g *Generate) { g.Temperature = float32(math.NaN()) }), ErrBadValue},
		{"top_p 0", &Generate{}, gen(func(g *Generate) { g.TopP = 0 }), ErrBadValue},
		{"undefined generate flag", &Generate{}, gen(func(g *Generate) { g.Flags = 1 << 9 }), ErrBadValue},
		{"mm item outside prompt", &Generate{}, gen(func(g *Generate) { g.MMItems = MMItemsOf([]MMItem{{Offset: 1, Length: 2}}) }), ErrBadValue},
		{"events over MaxEvents", &KVEvents{}, enc(&KVEvents{Events: []Event{removed, removed, removed}}), ErrLimit},
		{"event tier 3", &KVEvents{}, enc(&KVEvents{Events: []Event{{Kind: EventRemoved, Tier: 3}}}), ErrBadValue},
		{"event kind 9", &KVEvents{}, enc(&KVEvents{Events: []Event{{Kind: 9}}}), ErrBadValue},
		{"cleared with hashes", &KVEvents{}, enc(&KVEvents{Events: []Event{{Kind: EventCleared, Hashes: HashesOf([]uint64{1})}}}), ErrBadValue},
		{"last without finish", &TokensMsg{}, enc(&TokensMsg{Flags: TokLast}), ErrBadValue},
		{"finish without last", &TokensMsg{}, enc(&TokensMsg{Finish: FinishStop}), ErrBadValue},
		{"cancel reason 9", &Cancel{}, []byte{9}, ErrBadValue},
		{"bad magic", &Hello{}, []byte("HTTP/1.1 200 OK\r\n"), ErrVersion},
		{"welcome with a range", &Welcome{}, enc(&Welcome{Handshake{MinVersion: 1, MaxVersion: 2, Role: RoleEngine}}), ErrBadValue},
		{"role 0", &Hello{}, enc(&Hello{Handshake{MinVersion: 1, MaxVersion: 1}}), ErrBadValue},
		{"huge token count", &TokensMsg{}, append(make([]byte, 16), 0xff, 0xff, 0xff, 0x0f), ErrLimit},
		{"token count past payload", &TokensMsg{}, append(make([]byte, 16), 3, 0, 0, 0, 1, 2, 3, 4), ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.msg.Decode(tc.payload, &lim); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSnapshotRefusesNonStored(t *testing.T) {
	s := &Snapshot{Events: []Event{{Kind: EventRemoved}}}
	if _, err := s.AppendPayload(nil); !errors.Is(err, ErrBadValue) {
		t.Fatalf("encode: got %v", err)
	}
	var e encoder
	e.b = make([]byte, 28)
	appendEvents(&e, []Event{{Kind: EventRemoved}})
	if err := (&Snapshot{}).Decode(e.b, nil); !errors.Is(err, ErrBadValue) {
		t.Fatalf("decode: got %v", err)
	}
}

func TestEncodeTooLong(t *testing.T) {
	g := &Generate{Model: make([]byte, 70000), TopP: 1, Prompt: TokensOf([]uint32{1})}
	if _, err := AppendFrame(nil, 1, g); !errors.Is(err, ErrLimit) {
		t.Fatalf("got %v, want ErrLimit", err)
	}
}

func TestNegotiateVersion(t *testing.T) {
	if v, err := NegotiateVersion(1, 9); err != nil || v != MaxVersion {
		t.Fatalf("1..9: %d %v", v, err)
	}
	if _, err := NegotiateVersion(2, 9); !errors.Is(err, ErrVersion) {
		t.Fatalf("2..9: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	l := DefaultLimits()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	l.MaxFrameSize = 1
	l.MaxEvents = 0
	if err := l.Validate(); err == nil {
		t.Fatal("want errors")
	}
}

func TestTokensView(t *testing.T) {
	ids := []uint32{0, 1, 0xffffffff, 151643}
	v := TokensOf(ids)
	if v.Len() != 4 || v.At(2) != 0xffffffff || !v.Slice(1, 3).Equal(TokensOf(ids[1:3])) {
		t.Fatal("view mismatch")
	}
	if got := v.AppendTo([]uint32{7}); len(got) != 5 || got[4] != 151643 {
		t.Fatalf("AppendTo: %v", got)
	}
	if TokensFromBytes([]byte{1, 0, 0, 0, 9}).Len() != 1 {
		t.Fatal("TokensFromBytes must drop a partial id")
	}
}

func TestHashesView(t *testing.T) {
	hs := []uint64{0, 1, 1<<64 - 1, 0x0123456789abcdef}
	v := HashesOf(hs)
	if v.Len() != 4 || v.At(3) != 0x0123456789abcdef {
		t.Fatal("view mismatch")
	}
	got := v.AppendTo([]uint64{7})
	if len(got) != 5 || got[0] != 7 || got[3] != 1<<64-1 || got[4] != 0x0123456789abcdef {
		t.Fatalf("AppendTo: %v", got)
	}
	if got := HashesOf(nil).AppendTo([]uint64{7}); len(got) != 1 {
		t.Fatalf("AppendTo of no hashes: %v", got)
	}
}

// TestAppendWordsPortable: the word-at-a-time path big-endian machines
// take gives what the one copy gives.
func TestAppendWordsPortable(t *testing.T) {
	ids, hs := []uint32{1, 0xffffffff, 151643}, []uint64{3, 1<<64 - 1, 0x0123456789abcdef}
	fast32, fast64 := TokensOf(ids).AppendTo([]uint32{7}), HashesOf(hs).AppendTo([]uint64{7})
	defer func(was bool) { nativeLittleEndian = was }(nativeLittleEndian)
	nativeLittleEndian = false
	if got := TokensOf(ids).AppendTo([]uint32{7}); !slices.Equal(got, fast32) {
		t.Fatalf("tokens: %v, want %v", got, fast32)
	}
	if got := HashesOf(hs).AppendTo([]uint64{7}); !slices.Equal(got, fast64) {
		t.Fatalf("hashes: %v, want %v", got, fast64)
	}
}
