package llamacpp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// TestUTF8Incomplete is llama.cpp's validate_utf8 rule: a lead byte among
// the last four with too few bytes after it.
func TestUTF8Incomplete(t *testing.T) {
	for in, want := range map[string]bool{
		"": false, "a": false, "\xe4": true, "\xe4\xb8": true, "\xe4\xb8\xad": false, "\xe4A": true, "\xe4AB": false,
		"\xf0\x9f\x98": true, "\xf0\x9f\x98\x80": false, "\xc3": true, "\xc3\xa9": false, "\xad": false, "x\xf0": true,
	} {
		if got := utf8Incomplete([]byte(in)); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

// TestRecover: the ids left out before an event, from its text: one id
// (a unique piece), several that only one way spells, several spellings
// (guessed, same bytes), none.
func TestRecover(t *testing.T) {
	p := builtinPieces(t)
	for _, c := range []struct {
		name       string
		tail, text string
		k          int
		ok, exact  bool
		want       []uint32
	}{
		{"one", "", "\xe4\xb8", 1, true, true, []uint32{3490}},
		{"two-bytes", "", "\xe4\xb8", 2, true, true, []uint32{160, 116}},
		{"emoji", "", "\xf0\x9f\x98", 2, true, true, []uint32{9284, 246}},     // f09f 98: f0 9f98 is no pair of pieces
		{"guessed", "", "\xf0\x9f\xa5", 2, true, false, []uint32{172, 22129}}, // f0 9fa5 or f09f a5: the longest last piece
		{"complete-inside", "", "\xe4\xb8\xad\xe4", 2, false, false, nil},     // "中" then e4: the first piece left it complete
		{"tail", "\xe4", "\xb8", 1, true, true, []uint32{116}},
		{"none", "", "ab", 1, false, false, nil},
		{"too-many", "", "\xe4", 2, false, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids, exact, ok := p.Recover(nil, []byte(c.tail), []byte(c.text), c.k)
			if ok != c.ok || exact != c.exact || c.want != nil && !slices.Equal(ids, c.want) {
				t.Fatalf("%v exact %v ok %v; want %v exact %v ok %v", ids, exact, ok, c.want, c.exact, c.ok)
			}
			if ok && (len(ids) != c.k || string(p.Spell(nil, ids, false)) != c.text) {
				t.Fatalf("%v spells %q, want %d ids spelling %q", ids, p.Spell(nil, ids, false), c.k, c.text)
			}
		})
	}
}

// replay serves a captured /completion answer and records the bodies sent.
func replay(t *testing.T, answer []byte, bodies chan<- []byte) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		if bodies != nil {
			bodies <- b.Bytes()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// startEngine serves an Engine for url (no bridge, no cache view) and
// returns a router connection to it.
func startEngine(t *testing.T, url string) (*Engine, *wire.Conn) {
	t.Helper()
	e := NewEngine(url, testModel, builtinPieces(t), quiet)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "llama", BlockSize: 16, Models: []string{testModel}}, Logger: quiet}, engineOnly{e})
	e.Out = srv
	t.Cleanup(e.Client.CloseIdleConnections)
	return e, servetest.Router(t, srv)
}

// engineOnly serves an Engine without a bridge: no LOAD, no snapshot.
type engineOnly struct{ *Engine }

func (engineOnly) Load() []wire.Load               { return nil }
func (engineOnly) Snapshot(conn uint64, id uint32) {}

// frames reads stream's frames until its last TOKENS or an ERROR.
func frames(t *testing.T, c *wire.Conn, stream uint32) (ids []uint32, first, last wire.TokensMsg, e *wire.Error) {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Stream != stream {
			continue
		}
		if f.Type == wire.TypeError {
			e = &wire.Error{}
			if err := wire.DecodeFrame(f, e, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		ids = m.Tokens.AppendTo(ids)
		if m.First() {
			first = m
		}
		if m.Last() {
			last = m
			return
		}
	}
}

// TestRelayGolden replays the captured streams through the engine: the
// router gets the ids llama.cpp reports when asked without streaming,
// those the stream left out recovered (or, spelled another way, guessed),
// except those left out at the end, which no event spells; usage is the
// server's.
func TestRelayGolden(t *testing.T) {
	for _, c := range []struct {
		name                     string
		recovered, guessed, lost uint64
	}{
		{"completion", 0, 0, 0},
		{"completion_utf8_gaps", 4, 0, 2},
		{"completion_emoji", 6, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, conn := startEngine(t, replay(t, golden(t, c.name+".sse"), nil))
			want := nonStream(t, c.name)
			if err := conn.Send(1, &wire.Generate{Model: []byte(testModel), MaxTokens: 12, TopP: 1, Prompt: wire.TokensOf(seq(1000, want.TokensEvaluated))}); err != nil {
				t.Fatal(err)
			}
			ids, first, last, werr := frames(t, conn, 1)
			if werr != nil {
				t.Fatalf("stream failed: %+v", werr)
			}
			wantIDs := want.Tokens[:len(want.Tokens)-int(c.lost)]
			spells := func(ids []uint32) string { return string(e.Pieces.Spell(nil, ids, false)) }
			if c.guessed == 0 && !slices.Equal(ids, wantIDs) || spells(ids) != spells(wantIDs) {
				t.Fatalf("ids %v, llama.cpp's %v", ids, want.Tokens)
			}
			if first.CachedTokens != uint32(nonStreamCache(t, c.name)) || last.PromptTokens != uint32(want.TokensEvaluated) ||
				last.CompletionTokens != uint32(want.TokensPredicted) || last.Finish != finishOf(want.StopType) {
				t.Fatalf("first %+v last %+v; llama.cpp %+v", first, last, want)
			}
			if got := e.IDs(); got != (IDCounts{c.recovered, c.guessed, c.lost}) {
				t.Fatalf("left-out ids %+v, want %d recovered, %d guessed, %d lost", got, c.recovered, c.guessed, c.lost)
			}
		})
	}
}

// nonStreamCache is the cached prompt tokens the captured stream reports.
func nonStreamCache(t *testing.T, name string) int {
	run := runStream(bytes.NewReader(golden(t, name+".sse")))
	if len(run.events) == 0 || run.events[0].Timings == nil {
		t.Fatalf("%s: no timings", name)
	}
	return run.events[0].Timings.CacheN
}

// TestRelayErrorEvent: llama.cpp's error event fails the stream with its
// message.
func TestRelayErrorEvent(t *testing.T) {
	_, conn := startEngine(t, replay(t, golden(t, "completion_error.sse"), nil))
	if err := conn.Send(1, &wire.Generate{Model: []byte(testModel), MaxTokens: 4, TopP: 1, Prompt: wire.TokensOf(seq(5, 3))}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, e := frames(t, conn, 1); e == nil || e.Code != wire.CodeStreamFailed || !bytes.Contains([]byte(e.Message), []byte("Content-only")) {
		t.Fatalf("error %+v", e)
	}
}
