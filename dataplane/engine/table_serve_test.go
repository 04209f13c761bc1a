package engine

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// ttBackend is a wire/serve Backend that answers each GENERATE with the
// prompt reversed, in one frame, unless told to hold it or refuse it.
type ttBackend struct {
	srv *serve.Server

	mu        sync.Mutex
	hold      bool  // leave new requests running
	refuse    error // refuse new requests
	held      []serve.Key
	cancelled []serve.Key
}

func (b *ttBackend) Generate(k serve.Key, g *wire.Generate) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse != nil {
		return b.refuse
	}
	if b.hold {
		b.held = append(b.held, k)
		return nil
	}
	out := g.Prompt.AppendTo(nil)
	slices.Reverse(out)
	b.srv.Deliver([]serve.Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokFirst | wire.TokLast, Finish: wire.FinishStop,
		CachedTokens: 1, PromptTokens: uint32(g.Prompt.Len()), CompletionTokens: uint32(len(out)), Tokens: wire.TokensOf(out)}}})
	return nil
}

func (b *ttBackend) Cancel(k serve.Key) {
	b.mu.Lock()
	b.cancelled = append(b.cancelled, k)
	b.held = slices.DeleteFunc(b.held, func(h serve.Key) bool { return h == k })
	b.mu.Unlock()
	b.srv.Deliver([]serve.Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishCancelled}}})
}

func (b *ttBackend) Load() []wire.Load { return []wire.Load{{Running: 1}} }

func (b *ttBackend) Snapshot(conn uint64, id uint32) {
	_ = b.srv.SendTo(conn, &wire.Snapshot{SnapshotID: id, Last: true, Seq: 4,
		Events: []wire.Event{ttStored(wire.TierGPU, ttChainB...)}})
}

func (b *ttBackend) Idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held) == 0
}

// TestServeEngine: the pool against an engine built on wire/serve, the
// library kvgate-sim and kvgate-bridge use: handshake with a secret,
// snapshot on connect, streams, a refusal, cancel, KV events and LOAD to
// every router, and a drain.
func TestServeEngine(t *testing.T) {
	secret := []byte("fleet-secret")
	hs := ttHandshake("served")
	hs.Features = wire.FeatureSnapshot | wire.FeatureLoadRequest
	hs.LoRAs = []wire.LoRA{{ID: 3, Name: "sql"}}
	be := &ttBackend{}
	srv := serve.New(serve.Config{Handshake: hs, Secret: secret}, be)
	be.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	p, _ := ttPool(t, func(c *Config) { c.Secret = secret }, ln.Addr().String())
	e := p.Engines()[0]
	ttReady(t, e)
	slot, _ := e.Slot()

	t.Run("handshake", func(t *testing.T) {
		if got := e.Info(); got.ID != "served" || got.BlockSize != hs.BlockSize || got.Features != hs.Features {
			t.Errorf("Info() = %+v", got)
		}
		if base, lora, ok := e.Resolve("sql"); base != "m" || lora != 3 || !ok {
			t.Errorf("Resolve(sql) = %q, %d, %v", base, lora, ok)
		}
	})
	t.Run("snapshot on connect", func(t *testing.T) {
		ttWaitFor(t, "the snapshot in the index", func() bool { return ttHeld(p.Index(), slot, ttChainB).Depth() == 3 })
	})
	t.Run("stream", func(t *testing.T) {
		s, err := e.Generate(ttGenerate("m"))
		if err != nil {
			t.Fatal(err)
		}
		evs := ttCollect(t, s)
		end := evs[len(evs)-1]
		if !slices.Equal(ttTokens(evs), []uint32{4, 3, 2, 1}) || !evs[0].First || evs[0].Cached != 1 ||
			end.Finish != wire.FinishStop || end.PromptTokens != 4 || end.CompletionTokens != 4 || end.Err != nil {
			t.Errorf("events %+v", evs)
		}
	})
	t.Run("refused by the backend", func(t *testing.T) {
		be.mu.Lock()
		be.refuse = &serve.StreamError{Code: wire.CodeUnknownLoRA, Message: "no adapter 9"}
		be.mu.Unlock()
		defer func() { be.mu.Lock(); be.refuse = nil; be.mu.Unlock() }()
		s, err := e.Generate(ttGenerate("m"))
		if err != nil {
			t.Fatal(err)
		}
		evs := ttCollect(t, s)
		var re *wire.RemoteError
		if err := evs[len(evs)-1].Err; !errors.As(err, &re) || re.Code != wire.CodeUnknownLoRA || re.Stream != s.id {
			t.Errorf("refused stream ended with %v", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		be.mu.Lock()
		be.hold = true
		be.mu.Unlock()
		defer func() { be.mu.Lock(); be.hold = false; be.mu.Unlock() }()
		s, err := e.Generate(ttGenerate("m"))
		if err != nil {
			t.Fatal(err)
		}
		ttWaitFor(t, "the request running", func() bool { return !be.Idle() })
		s.Cancel(wire.CancelClientGone)
		evs := ttCollect(t, s)
		if end := evs[len(evs)-1]; end.Finish != wire.FinishCancelled || end.Err != nil {
			t.Errorf("cancelled stream ended with %+v", end)
		}
		be.mu.Lock()
		defer be.mu.Unlock()
		if len(be.cancelled) != 1 || be.cancelled[0].Stream != s.id {
			t.Errorf("backend cancelled %v, want stream %d", be.cancelled, s.id)
		}
	})
	t.Run("KV events and LOAD to every router", func(t *testing.T) {
		srv.Broadcast(ttBatch(5, 0, ttStored(wire.TierCPU, ttChainA...)))
		srv.Broadcast(&wire.Load{Running: 6, Waiting: 2})
		ttWaitFor(t, "the LOAD", func() bool { l := e.Load(); return l != nil && l.Running == 6 && l.Waiting == 2 })
		if got := ttHeld(p.Index(), slot, ttChainA); got.Blocks != [3]uint32{0, 3, 0} {
			t.Errorf("after the broadcast the engine holds %+v", got)
		}
	})
	t.Run("drain", func(t *testing.T) {
		be.mu.Lock()
		be.hold = true
		be.mu.Unlock()
		s, err := e.Generate(ttGenerate("m"))
		if err != nil {
			t.Fatal(err)
		}
		ttWaitFor(t, "the request running", func() bool { return !be.Idle() })
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(context.Background()) }()
		ttWaitFor(t, "draining", func() bool { return e.State() == StateDraining })
		if _, err := e.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
			t.Errorf("Generate while draining: %v", err)
		}
		be.mu.Lock()
		k := be.held[0]
		be.held = nil
		be.mu.Unlock()
		srv.Deliver([]serve.Tokens{{Key: k, Msg: wire.TokensMsg{Flags: wire.TokFirst | wire.TokLast, Finish: wire.FinishLength, Tokens: wire.TokensOf([]uint32{5})}}})
		if evs := ttCollect(t, s); evs[len(evs)-1].Finish != wire.FinishLength || evs[len(evs)-1].Err != nil {
			t.Errorf("the draining engine's last stream: %+v", evs)
		}
		if err := <-shut; err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		ttWaitFor(t, "down once the engine closed", func() bool { return e.State() == StateDown })
		ttWaitFor(t, "the gone engine's blocks forgotten", func() bool { return ttHeld(p.Index(), slot, ttChainA).Depth() == 0 })
	})
}
