package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/perf/gguf"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// The tests in this file run against a real llama-server (make
// llama-server); they skip without one unless $KVGATE_REQUIRE_LLAMA=1.

const realBlock = 16

// realRouter is a router's connection to a bridge in front of a real
// server: it reads every frame, keeping the index the KV events build,
// the last LOAD, and each stream's frames.
type realRouter struct {
	t       *testing.T
	c       *wire.Conn
	ix      index
	load    wire.Load
	loads   int
	streams map[uint32]*realStream
}

type realStream struct {
	ids         []uint32
	first, last wire.TokensMsg
	err         *wire.Error
	done        bool
}

// startReal checks the server at url, serves a bridge for it polling
// /slots and /metrics every 50 ms, and returns it and a router's view.
func startReal(t *testing.T, url string) (*Bridge, *realRouter) {
	t.Helper()
	e := NewEngine(url, testModel, builtinPieces(t), quiet)
	s, err := Check(context.Background(), e.Client, Spec{URL: url, Model: testModel, Tokenizer: builtin(t)})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBridge(e, hasher(t, realBlock), s)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "llama", BlockSize: realBlock,
		Features: wire.FeatureSnapshot | wire.FeatureLoadRequest, Models: []string{testModel},
		Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: b.Capacity}}}, Logger: quiet}, b)
	b.Out = srv
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Poll(ctx, 50*time.Millisecond, 50*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done; e.Client.CloseIdleConnections() })
	return b, &realRouter{t: t, c: servetest.Router(t, srv), ix: index{}, streams: map[uint32]*realStream{}}
}

// next reads and applies one frame.
func (r *realRouter) next() {
	r.t.Helper()
	_ = r.c.NetConn.SetReadDeadline(time.Now().Add(60 * time.Second))
	f, err := r.c.ReadFrame()
	if err != nil {
		r.t.Fatal(err)
	}
	switch f.Type {
	case wire.TypeKVEvents:
		var m wire.KVEvents
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			r.t.Fatal(err)
		}
		r.ix.apply(r.t, m.Events)
	case wire.TypeLoad:
		if err := wire.DecodeFrame(f, &r.load, nil); err != nil {
			r.t.Fatal(err)
		}
		r.loads++
	case wire.TypeTokens, wire.TypeError:
		s := r.streams[f.Stream]
		if s == nil {
			s = &realStream{}
			r.streams[f.Stream] = s
		}
		if f.Type == wire.TypeError {
			s.err, s.done = &wire.Error{}, true
			_ = wire.DecodeFrame(f, s.err, nil)
			return
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			r.t.Fatal(err)
		}
		s.ids = m.Tokens.AppendTo(s.ids)
		if m.First() {
			s.first = m
		}
		if m.Last() {
			s.last, s.done = m, true
		}
	}
}

// until reads frames until cond holds.
func (r *realRouter) until(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s in 120 s", what)
		}
		r.next()
	}
}

// generate runs one request to its end.
func (r *realRouter) generate(stream uint32, g *wire.Generate) *realStream {
	r.t.Helper()
	if err := r.c.Send(stream, g); err != nil {
		r.t.Fatal(err)
	}
	r.until(fmt.Sprintf("end of stream %d", stream), func() bool { return r.streams[stream] != nil && r.streams[stream].done })
	s := r.streams[stream]
	if s.err != nil {
		r.t.Fatalf("stream %d failed: %+v", stream, s.err)
	}
	return s
}

// holds reports whether the index holds every full block of tokens.
func (r *realRouter) holds(h func([]uint32) []uint64, tokens []uint32) bool {
	for _, x := range h(tokens) {
		if !r.ix[x] {
			return false
		}
	}
	return true
}

func greedy(prompt []uint32, n uint32) *wire.Generate {
	return &wire.Generate{Model: []byte(testModel), MaxTokens: n, TopP: 1, DPRank: wire.AnyRank, Prompt: wire.TokensOf(prompt)}
}

// direct asks the server itself, without streaming, what the bridge asks
// it for g, and returns its answer.
func direct(t *testing.T, url string, g *wire.Generate) event {
	t.Helper()
	body, err := (&Engine{Model: testModel}).request(g)
	if err != nil {
		t.Fatal(err)
	}
	body.Stream = false
	b, err := call(context.Background(), http.DefaultClient, "POST", url, "/completion", body)
	if err != nil {
		t.Fatal(err)
	}
	var ev event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestRealGenerate: a greedy request through the bridge streams the ids
// llama.cpp returns for the same request asked directly, with its usage;
// repeated, its prompt comes from the cache (all but the last token, which
// llama.cpp evaluates again).
func TestRealGenerate(t *testing.T) {
	s := realServer(t, 2, 2048)
	_, r := startReal(t, s.URL)
	prompt := seq(1000, 100)
	got := r.generate(1, greedy(prompt, 16))
	want := direct(t, s.URL, greedy(prompt, 16))
	if !slices.Equal(got.ids, want.Tokens) || got.last.CompletionTokens != 16 || got.last.PromptTokens != 100 ||
		got.last.Finish != wire.FinishLength {
		t.Fatalf("through the bridge %v (last %+v), asked directly %v", got.ids, got.last, want.Tokens)
	}
	again := r.generate(3, greedy(prompt, 16))
	if again.first.CachedTokens != 99 || !slices.Equal(again.ids, want.Tokens) {
		t.Fatalf("repeated: cached %d, ids %v", again.first.CachedTokens, again.ids)
	}
}

// TestRealCancel: CANCEL ends the stream as cancelled and llama.cpp stops
// the task (its slot is released).
func TestRealCancel(t *testing.T) {
	s := realServer(t, 1, 2048)
	b, r := startReal(t, s.URL)
	if err := r.c.Send(1, greedy(seq(1000, 40), 1500)); err != nil {
		t.Fatal(err)
	}
	r.until("first tokens", func() bool { return r.streams[1] != nil && len(r.streams[1].ids) >= 2 })
	if err := r.c.Send(1, &wire.Cancel{}); err != nil {
		t.Fatal(err)
	}
	r.until("end of the cancelled stream", func() bool { return r.streams[1].done })
	if st := r.streams[1]; st.err != nil || st.last.Finish != wire.FinishCancelled {
		t.Fatalf("cancelled stream: %+v %+v", st.last, st.err)
	}
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		slots, err := b.fetchSlots(context.Background())
		if err != nil || slots[0].IsProcessing {
			return fmt.Errorf("slot still processing (%v)", err)
		}
		return nil
	})
}

// TestRealSlotEvents: the bridge's events from what /slots and its
// requests say. After a request its prompt's blocks are in the router's
// index; another prompt on the server's one slot takes their place (they
// leave, its own arrive); a snapshot holds what the events built.
func TestRealSlotEvents(t *testing.T) {
	s := realServer(t, 1, 2048)
	b, r := startReal(t, s.URL)
	h := func(tokens []uint32) []uint64 { hs, _ := b.T.h.Hash(nil, tokens, nil); return hs }
	a, c := seq(1000, 64), seq(5000, 64)
	r.generate(1, greedy(a, 4))
	r.until("the first prompt's blocks", func() bool { return r.holds(h, a) })
	r.generate(3, greedy(c, 4))
	r.until("the second prompt's blocks, the first's gone", func() bool {
		return r.holds(h, c) && !slices.ContainsFunc(h(a), func(x uint64) bool { return r.ix[x] })
	})
	if err := r.c.Send(0, &wire.SnapshotRequest{SnapshotID: 5}); err != nil {
		t.Fatal(err)
	}
	snap := index{}
	for last := false; !last; {
		_ = r.c.NetConn.SetReadDeadline(time.Now().Add(60 * time.Second))
		f, err := r.c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != wire.TypeSnapshot {
			continue // KV events cannot come: nothing runs
		}
		var m wire.Snapshot
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		for _, ev := range m.Events {
			snap[ev.Hashes.At(0)] = true
		}
		last = m.Last
	}
	if len(snap) != len(r.ix) || !r.holdsAll(snap) {
		t.Fatalf("snapshot %d blocks, events built %d", len(snap), len(r.ix))
	}
}

func (r *realRouter) holdsAll(ix index) bool {
	for x := range ix {
		if !r.ix[x] {
			return false
		}
	}
	return true
}

// TestRealLoad: capacity from /props (slots × slot context, in blocks),
// LOAD from /slots and /metrics: the running request and the one waiting
// for the server's only slot, the tokens its slot holds.
func TestRealLoad(t *testing.T) {
	s := realServer(t, 1, 2048)
	b, r := startReal(t, s.URL)
	if b.Capacity != 2048/realBlock || r.c.Peer.Tiers[0].Blocks != b.Capacity {
		t.Fatalf("capacity %d, announced %+v", b.Capacity, r.c.Peer.Tiers)
	}
	for _, st := range []uint32{1, 3} {
		if err := r.c.Send(st, greedy(seq(1000*st, 48), 1500)); err != nil {
			t.Fatal(err)
		}
	}
	r.until("LOAD with one running and one waiting", func() bool {
		l := r.load
		return l.Running == 1 && l.Waiting == 1 && len(l.Tiers) == 1 && l.Tiers[0].Total == b.Capacity && l.Tiers[0].Used >= 3 &&
			l.ActiveDecodeTokens >= 48
	})
	for _, st := range []uint32{1, 3} {
		if err := r.c.Send(st, &wire.Cancel{}); err != nil {
			t.Fatal(err)
		}
	}
	r.until("both streams' ends", func() bool {
		return r.streams[1] != nil && r.streams[1].done && r.streams[3] != nil && r.streams[3].done
	})
}

// TestRealRefusals: a real server that is not what the flags say is
// refused: another model name, a tokenizer that is not the server's.
func TestRealRefusals(t *testing.T) {
	s := realServer(t, 1, 2048)
	ctx := context.Background()
	_, err := Check(ctx, http.DefaultClient, Spec{URL: s.URL, Model: "Qwen/Qwen3-8B", Tokenizer: builtin(t)})
	if !errors.Is(err, ErrModelMismatch) || !strings.Contains(err.Error(), testModel) {
		t.Fatalf("wrong model: %v", err)
	}
	_, err = Check(ctx, http.DefaultClient, Spec{URL: s.URL, Model: testModel, Tokenizer: otherTokenizer(t)})
	if !errors.Is(err, ErrTokenizerMismatch) || !strings.Contains(err.Error(), "probe 0") {
		t.Fatalf("wrong tokenizer: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

// otherTokenizer is Qwen3's tokenizer without its first thousand merges:
// the same vocabulary, other ids for most text.
func otherTokenizer(t *testing.T) *tokenize.Tokenizer {
	t.Helper()
	files, err := gguf.BuiltinTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	var tj map[string]json.RawMessage
	if err := json.Unmarshal(files.JSON, &tj); err != nil {
		t.Fatal(err)
	}
	var model map[string]json.RawMessage
	if err := json.Unmarshal(tj["model"], &model); err != nil {
		t.Fatal(err)
	}
	var merges []json.RawMessage
	if err := json.Unmarshal(model["merges"], &merges); err != nil {
		t.Fatal(err)
	}
	model["merges"], _ = json.Marshal(merges[1000:])
	tj["model"], _ = json.Marshal(model)
	b, _ := json.Marshal(tj)
	tok, err := tokenize.New(b, files.Config)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b, files.JSON) {
		t.Fatal("tokenizer unchanged")
	}
	return tok
}
