package vllm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// loadDelay is how long the fake takes to load an adapter: LOADED's
// load_ns is at least this.
const loadDelay = 20 * time.Millisecond

// testAdapters: three the fake can load, one whose path holds none, one
// the engine was started with.
var testAdapters = []vllm.Adapter{
	{Name: "a", WireID: 1, Source: "/ad/a"}, {Name: "b", WireID: 2, Source: "/ad/b"},
	{Name: "c", WireID: 3, Source: "/ad/c"}, {Name: "gone", WireID: 4, Source: "/ad/missing"},
	{Name: "static", WireID: 5}, // vLLM's --lora-modules: no source
}

// loraRig is a bridge with adapter residency in front of a fake vLLM, and
// a router connection that reads ADAPTERS; a goroutine files every frame
// it reads.
type loraRig struct {
	fake *vllmtest.Fake
	b    *vllm.Bridge
	res  *vllm.Residency
	conn *wire.Conn

	mu       sync.Mutex
	adapters []wire.Adapters
	streams  map[uint32][]wire.Frame
}

func startLoRARig(t *testing.T, slots int, opts ...vllmtest.Option) *loraRig {
	t.Helper()
	f := startFake(t, opts...)
	log := slog.New(slog.DiscardHandler)
	names := map[uint32]string{}
	for _, a := range testAdapters {
		names[a.WireID] = a.Name
	}
	e := vllm.NewEngine(f.URL, "m", names, log)
	e.Residency = vllm.NewResidency(f.URL, e.Client, "m", slots, 1, testAdapters, log)
	b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), 1, 100)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4, Models: []string{"m"},
		Features: wire.FeatureAdapters | wire.FeatureSnapshot}, Logger: log}, b)
	e.Out = srv
	e.Residency.Announce = func(m *wire.Adapters) { srv.BroadcastIf(wire.FeatureAdapters, m) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, ln.Addr().String(), &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r", Features: wire.FeatureAdapters}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	checkFor(t, 20*time.Second, time.Millisecond, func() error { // broadcasts reach only routers the server holds
		if srv.Routers() != 1 {
			return fmt.Errorf("the server holds %d routers", srv.Routers())
		}
		return nil
	})
	rig := &loraRig{fake: f, b: b, res: e.Residency, conn: c, streams: map[uint32][]wire.Frame{}}
	go rig.read()
	return rig
}

func (r *loraRig) read() {
	for {
		f, err := r.conn.ReadFrame()
		if err != nil {
			return
		}
		f.Payload = append([]byte(nil), f.Payload...)
		r.mu.Lock()
		if f.Type == wire.TypeAdapters {
			var m wire.Adapters
			if wire.DecodeFrame(f, &m, nil) == nil {
				r.adapters = append(r.adapters, m)
			}
		} else if f.Stream != 0 {
			r.streams[f.Stream] = append(r.streams[f.Stream], f)
		}
		r.mu.Unlock()
	}
}

// waitAdapters waits for n ADAPTERS frames and returns them all.
func (r *loraRig) waitAdapters(t *testing.T, n int) []wire.Adapters {
	t.Helper()
	var out []wire.Adapters
	checkFor(t, 20*time.Second, 2*time.Millisecond, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = append([]wire.Adapters(nil), r.adapters...)
		if len(out) < n {
			return fmt.Errorf("%d ADAPTERS frames, want %d", len(out), n)
		}
		return nil
	})
	return out
}

// generate sends a request for adapter lora on stream and waits for its
// end: its tokens, or the ERROR that ended it.
func (r *loraRig) generate(t *testing.T, stream, lora uint32) (toks []uint32, e *wire.Error) {
	t.Helper()
	g := &wire.Generate{Model: []byte("m"), LoRAID: lora, MaxTokens: 2, TopP: 1, Prompt: wire.TokensOf(prompt(8))}
	if err := r.conn.Send(stream, g); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, 2*time.Millisecond, func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		toks, e = nil, nil
		for _, f := range r.streams[stream] {
			switch f.Type {
			case wire.TypeError:
				e = &wire.Error{}
				if err := wire.DecodeFrame(f, e, nil); err != nil {
					t.Fatal(err)
				}
				return nil
			case wire.TypeTokens:
				var m wire.TokensMsg
				if err := wire.DecodeFrame(f, &m, nil); err != nil {
					t.Fatal(err)
				}
				toks = m.Tokens.AppendTo(toks)
				if m.Last() {
					return nil
				}
			}
		}
		return fmt.Errorf("stream %d has not ended", stream)
	})
	return toks, e
}

// idle waits until no request holds an adapter.
func (r *loraRig) idle(t *testing.T) {
	t.Helper()
	checkFor(t, 20*time.Second, time.Millisecond, func() error {
		if n := r.res.Stats().InUse; n != 0 {
			return fmt.Errorf("%d requests hold an adapter", n)
		}
		return nil
	})
}

// checkAdapters checks one ADAPTERS frame field by field.
func checkAdapters(t *testing.T, m wire.Adapters, change wire.AdapterChange, slots uint16, loras ...wire.LoRA) {
	t.Helper()
	if m.DPRank != 0 || m.Change != change || m.Slots != slots || fmt.Sprint(m.LoRAs) != fmt.Sprint(loras) {
		t.Fatalf("ADAPTERS %+v, want %s of %v with %d slots", m, change, loras, slots)
	}
	switch {
	case change == wire.AdaptersLoaded && m.LoadNanos < uint64(loadDelay):
		t.Fatalf("LOADED load_ns %d: under the engine's %v", m.LoadNanos, loadDelay)
	case change != wire.AdaptersLoaded && m.LoadNanos != 0:
		t.Fatalf("%s with load_ns %d", change, m.LoadNanos)
	}
}

// TestAdaptersLoadedOnDemand: the bridge reads the engine's residency and
// announces it; a request for an adapter that is not resident loads it
// through /v1/load_lora_adapter (LOADED with the time the load took), then
// runs on it; with every slot taken the least recently used adapter is
// unloaded first (EVICTED); the engine never holds more than the slots; a
// load vLLM refuses ends the request with UNKNOWN_LORA and vLLM's message;
// a router's SNAPSHOT_REQUEST is answered with RESIDENT first.
func TestAdaptersLoadedOnDemand(t *testing.T) {
	rig := startLoRARig(t, 2, vllmtest.WithRuntimeLoRA(loadDelay, "/ad/a", "/ad/b", "/ad/c"))
	if err := rig.res.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAdapters(t, rig.waitAdapters(t, 1)[0], wire.AdaptersResident, 2)

	a, b, c := wire.LoRA{ID: 1, Name: "a"}, wire.LoRA{ID: 2, Name: "b"}, wire.LoRA{ID: 3, Name: "c"}
	for i, lora := range []uint32{1, 2, 1, 3} { // a, b, a again (resident), c evicts b
		if toks, e := rig.generate(t, uint32(2*i+1), lora); e != nil || len(toks) != 2 {
			t.Fatalf("request for adapter %d: tokens %v, error %+v", lora, toks, e)
		}
		rig.idle(t) // the stream's end comes before its hold ends
	}
	got := rig.waitAdapters(t, 5)
	checkAdapters(t, got[1], wire.AdaptersLoaded, 2, a)
	checkAdapters(t, got[2], wire.AdaptersLoaded, 2, b)
	checkAdapters(t, got[3], wire.AdaptersEvicted, 2, b)
	checkAdapters(t, got[4], wire.AdaptersLoaded, 2, c)
	models := ""
	for _, r := range rig.fake.Requests() {
		models += r.Model + " "
	}
	if models != "a b a c " {
		t.Fatalf("the engine served %q", models)
	}
	var calls []string
	for _, call := range rig.fake.LoRACalls() {
		calls = append(calls, fmt.Sprintf("%s %s %s %d", call.Op, call.Name, call.Path, call.Status))
		if call.Registered > 2 {
			t.Fatalf("the engine held %d adapters, over its 2 slots: %+v", call.Registered, call)
		}
	}
	if want := "load a /ad/a 200,load b /ad/b 200,unload b  200,load c /ad/c 200"; strings.Join(calls, ",") != want {
		t.Fatalf("adapter calls %q, want %q", strings.Join(calls, ","), want)
	}

	// A path vLLM finds no adapter in: a clear error, not a hang; the slot
	// taken for it (the least recently used, a) is announced freed.
	_, e := rig.generate(t, 21, 4)
	if e == nil || e.Code != wire.CodeUnknownLoRA || !strings.Contains(string(e.Message), "vLLM answered 404: Loading lora gone failed: No adapter found for /ad/missing") {
		t.Fatalf("failed load ended the stream with %+v", e)
	}
	checkAdapters(t, rig.waitAdapters(t, 6)[5], wire.AdaptersEvicted, 2, a)
	if s := rig.res.Stats(); s.Loads != 3 || s.Evictions != 2 || s.Failures != 1 || s.Resident != 1 || s.LoadTime < 3*loadDelay {
		t.Fatalf("stats %+v", s)
	}

	// A router's snapshot request: residency first.
	if err := rig.conn.Send(0, &wire.SnapshotRequest{SnapshotID: 9}); err != nil {
		t.Fatal(err)
	}
	checkAdapters(t, rig.waitAdapters(t, 7)[6], wire.AdaptersResident, 2, c)
}

// TestAdaptersNeverEvictInUse: with every slot held by an adapter a
// request is using, a request for another adapter waits (nothing is
// unloaded) until one is released, then evicts it.
func TestAdaptersNeverEvictInUse(t *testing.T) {
	rig := startLoRARig(t, 1, vllmtest.WithRuntimeLoRA(loadDelay, "/ad/a", "/ad/b"))
	ctx := context.Background()
	if err := rig.res.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rig.res.Acquire(ctx, 2) }()
	checkFor(t, 20*time.Second, 2*time.Millisecond, func() error {
		if w := rig.res.Stats().Waiting; w != 1 {
			return fmt.Errorf("%d requests waiting for a slot", w)
		}
		return nil
	})
	if calls := rig.fake.LoRACalls(); len(calls) != 1 || calls[0].Op != "load" || calls[0].Name != "a" {
		t.Fatalf("an adapter in use was touched: %+v", calls)
	}
	rig.res.Release(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rig.fake.Registered("a") || !rig.fake.Registered("b") {
		t.Fatalf("after the release: a registered %v, b %v", rig.fake.Registered("a"), rig.fake.Registered("b"))
	}
	// A request that gives up while it waits for a slot leaves no trace.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- rig.res.Acquire(cctx, 1) }()
	checkFor(t, 20*time.Second, 2*time.Millisecond, func() error {
		if w := rig.res.Stats().Waiting; w != 1 {
			return fmt.Errorf("%d requests waiting for a slot", w)
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if s := rig.res.Stats(); s.Waiting != 0 || s.Resident != 1 {
		t.Fatalf("stats after the cancelled wait %+v", s)
	}
}

// TestAdaptersRuntimeUpdatingDisabled: vLLM without
// VLLM_ALLOW_RUNTIME_LORA_UPDATING has no load route; the request ends
// with an error that says what to set.
func TestAdaptersRuntimeUpdatingDisabled(t *testing.T) {
	rig := startLoRARig(t, 2)
	_, e := rig.generate(t, 1, 1)
	if e == nil || e.Code != wire.CodeUnknownLoRA || !strings.Contains(string(e.Message), "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True") {
		t.Fatalf("stream ended with %+v", e)
	}
	if s := rig.res.Stats(); s.Failures != 1 || s.Resident != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestAdaptersSyncWithEngine: an adapter registered behind the bridge's
// back is resident once listed (no load), or found registered when the
// bridge loads it (vLLM's duplicate refusal); a restarted engine that lost
// its runtime adapters is announced empty as soon as its events say it
// restarted.
func TestAdaptersSyncWithEngine(t *testing.T) {
	rig := startLoRARig(t, 2, vllmtest.WithRuntimeLoRA(loadDelay, "/ad/a", "/ad/b"))
	ctx := context.Background()
	if err := vllm.LoadAdapter(ctx, rig.res.Client, rig.fake.URL, "a", "/ad/a"); err != nil {
		t.Fatal(err)
	}
	// Not synced yet: the bridge loads a, vLLM says it is there already.
	if toks, e := rig.generate(t, 1, 1); e != nil || len(toks) != 2 {
		t.Fatalf("tokens %v error %+v", toks, e)
	}
	checkAdapters(t, rig.waitAdapters(t, 1)[0], wire.AdaptersResident, 2, wire.LoRA{ID: 1, Name: "a"})
	if err := vllm.LoadAdapter(ctx, rig.res.Client, rig.fake.URL, "b", "/ad/b"); err != nil {
		t.Fatal(err)
	}
	if err := rig.res.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	checkAdapters(t, rig.waitAdapters(t, 2)[1], wire.AdaptersResident, 2, wire.LoRA{ID: 1, Name: "a"}, wire.LoRA{ID: 2, Name: "b"})
	// The engine restarts without its runtime adapters: the lost events
	// make the bridge read its adapters at once.
	rig.fake.UnregisterAll()
	rig.b.Lost(0, "engine restarted")
	checkAdapters(t, rig.waitAdapters(t, 3)[2], wire.AdaptersResident, 2)
	if s := rig.res.Stats(); s.Loads != 0 || s.Resident != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFakeLoRAErrors: the fake answers the runtime adapter API as vLLM's
// serving_models.py does, and the bridge's client reads each answer.
func TestFakeLoRAErrors(t *testing.T) {
	f := startFake(t, vllmtest.WithRuntimeLoRA(0, "/ad/a"))
	ctx, c := context.Background(), vllm.NewEngine(f.URL, "m", nil, nil).Client
	if err := vllm.LoadAdapter(ctx, c, f.URL, "a", "/ad/a"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		msg    string
	}{
		{"duplicate", func() error { return vllm.LoadAdapter(ctx, c, f.URL, "a", "/ad/a") }, 400,
			"The lora adapter 'a' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."},
		{"no adapter at path", func() error { return vllm.LoadAdapter(ctx, c, f.URL, "x", "/nowhere") }, 404,
			"Loading lora x failed: No adapter found for /nowhere"},
		{"empty name", func() error { return vllm.LoadAdapter(ctx, c, f.URL, "", "/ad/a") }, 400,
			"Both 'lora_name' and 'lora_path' must be provided."},
		{"unload unknown", func() error { return vllm.UnloadAdapter(ctx, c, f.URL, "x") }, 404, "The lora adapter 'x' cannot be found."},
		{"unload empty", func() error { return vllm.UnloadAdapter(ctx, c, f.URL, "") }, 400,
			"'lora_name' needs to be provided to unload a LoRA adapter."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ae *vllm.LoRAAPIError
			if err := tc.call(); !errors.As(err, &ae) || ae.Status != tc.status || ae.Message != tc.msg {
				t.Fatalf("got %v, want %d %q", err, tc.status, tc.msg)
			}
		})
	}
	cards, err := vllm.FetchModels(ctx, c, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := vllm.ResidentAdapters(cards, "m"); fmt.Sprint(got) != "[a]" || cards[1].Root != "/ad/a" {
		t.Fatalf("listing %+v", cards)
	}
	if err := vllm.UnloadAdapter(ctx, c, f.URL, "a"); err != nil || f.Registered("a") {
		t.Fatalf("unload: %v, registered %v", err, f.Registered("a"))
	}
	off := startFake(t)
	if err := vllm.LoadAdapter(ctx, c, off.URL, "a", "/ad/a"); !errors.Is(err, vllm.ErrRuntimeLoRADisabled) {
		t.Fatalf("without the runtime API: %v", err)
	}
}

// TestAdaptersStaticPinned: an adapter the engine was started with (no
// source) is served without a load, holds its slot and is never unloaded;
// with every slot so held, a request for a loadable adapter is refused at
// once, not left waiting for a slot that never comes free.
func TestAdaptersStaticPinned(t *testing.T) {
	rig := startLoRARig(t, 1, vllmtest.WithLoRA("static", 1), vllmtest.WithRuntimeLoRA(loadDelay, "/ad/a"))
	if err := rig.res.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkAdapters(t, rig.waitAdapters(t, 1)[0], wire.AdaptersResident, 1, wire.LoRA{ID: 5, Name: "static"})
	if toks, e := rig.generate(t, 1, 5); e != nil || len(toks) != 2 {
		t.Fatalf("static adapter: tokens %v, error %+v", toks, e)
	}
	_, e := rig.generate(t, 3, 1)
	if e == nil || e.Code != wire.CodeUnknownLoRA || !strings.Contains(string(e.Message), "cannot unload") {
		t.Fatalf("a request no slot can take ended with %+v", e)
	}
	if calls := rig.fake.LoRACalls(); len(calls) != 0 || !rig.fake.Registered("static") {
		t.Fatalf("adapter calls %+v, static registered %v", calls, rig.fake.Registered("static"))
	}
}

// TestAdaptersVanished: the engine lost an adapter the bridge held (a
// restart its events have not shown yet): the request vLLM answers 404 ends
// OVERLOADED, which routers re-route, the residency is announced without
// the adapter, and the next request loads it again.
func TestAdaptersVanished(t *testing.T) {
	rig := startLoRARig(t, 2, vllmtest.WithRuntimeLoRA(loadDelay, "/ad/a"))
	if toks, e := rig.generate(t, 1, 1); e != nil || len(toks) != 2 {
		t.Fatalf("tokens %v error %+v", toks, e)
	}
	checkAdapters(t, rig.waitAdapters(t, 1)[0], wire.AdaptersLoaded, 2, wire.LoRA{ID: 1, Name: "a"})
	rig.fake.UnregisterAll()
	if _, e := rig.generate(t, 3, 1); e == nil || e.Code != wire.CodeOverloaded || !strings.Contains(string(e.Message), "does not exist") {
		t.Fatalf("request for a lost adapter ended with %+v", e)
	}
	checkAdapters(t, rig.waitAdapters(t, 2)[1], wire.AdaptersResident, 2)
	if toks, e := rig.generate(t, 5, 1); e != nil || len(toks) != 2 {
		t.Fatalf("after the loss: tokens %v error %+v", toks, e)
	}
	checkAdapters(t, rig.waitAdapters(t, 3)[2], wire.AdaptersLoaded, 2, wire.LoRA{ID: 1, Name: "a"})
	// A 404 for an adapter the bridge did not hold is the request's own.
	if rig.res.Vanished("b") || rig.res.Vanished("nope") {
		t.Fatal("Vanished of an adapter not held")
	}
}
