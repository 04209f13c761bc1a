package sim

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

func startServer(t testing.TB, mod func(*Config)) (*Server, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Rank.GPUBlocks = 512
	cfg.Rank.Profile = ZeroProfile
	cfg.LoadInterval = 0
	cfg.LoRAs = []wire.LoRA{{ID: 3, Name: "sql"}}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Close)
	return s, ln.Addr().String()
}

func dialRouter(t *testing.T, addr string, secret string) *wire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Secret: []byte(secret), Local: wire.Handshake{Role: wire.RoleRouter, ID: "test-router"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c
}

func generate(prompt []uint32, maxTokens uint32) *wire.Generate {
	return &wire.Generate{RequestID: []byte("r"), Model: []byte("kvgate/sim"), MaxTokens: maxTokens, TopP: 1,
		Flags: wire.GenIgnoreEOS, DPRank: wire.AnyRank, Prompt: wire.TokensOf(prompt)}
}

// readStream reads frames until stream's last TOKENS or ERROR, counting
// other frames by type and applying KV events to view when one is given.
func readStream(t *testing.T, c *wire.Conn, stream uint32, others map[wire.Type]int, view ...*engineView) ([]wire.TokensMsg, *wire.Error) {
	t.Helper()
	var msgs []wire.TokensMsg
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if f.Stream != stream {
			others[f.Type]++
			if f.Type == wire.TypeKVEvents && len(view) > 0 {
				var m wire.KVEvents
				must(t, wire.DecodeFrame(f, &m, nil))
				must(t, view[0].ix.Apply(view[0].slot, kvEvents(m.Events)))
			}
			continue
		}
		switch f.Type {
		case wire.TypeTokens:
			var m wire.TokensMsg
			must(t, wire.DecodeFrame(f, &m, nil))
			m.Tokens = wire.TokensOf(m.Tokens.AppendTo(nil)) // copy out of the read buffer
			msgs = append(msgs, m)
			if m.Last() {
				return msgs, nil
			}
		case wire.TypeError:
			var e wire.Error
			must(t, wire.DecodeFrame(f, &e, nil))
			return msgs, &e
		default:
			t.Fatalf("unexpected %s on stream %d", f.Type, stream)
		}
	}
}

func TestServerGenerate(t *testing.T) {
	_, addr := startServer(t, nil)
	c := dialRouter(t, addr, "")
	if c.Peer.Role != wire.RoleEngine || c.Peer.BlockSize != 16 || c.Peer.Models[0] != "kvgate/sim" {
		t.Fatalf("handshake: %+v", c.Peer)
	}
	prompt := make([]uint32, 100)
	for i := range prompt {
		prompt[i] = uint32(i)
	}
	must(t, c.Send(1, generate(prompt, 20)))
	others := map[wire.Type]int{}
	msgs, e := readStream(t, c, 1, others)
	if e != nil {
		t.Fatalf("error %+v", e)
	}
	n := 0
	for _, m := range msgs {
		n += m.Tokens.Len()
	}
	first, last := msgs[0], msgs[len(msgs)-1]
	if n != 20 || !first.First() || first.CachedTokens != 0 || last.Finish != wire.FinishLength ||
		last.PromptTokens != 100 || last.CompletionTokens != 20 {
		t.Fatalf("%d tokens; first %+v; last %+v", n, first, last)
	}
	// The same prompt again reports its cached blocks (96 of 100 tokens).
	must(t, c.Send(3, generate(prompt, 2)))
	msgs, _ = readStream(t, c, 3, others)
	if msgs[0].CachedTokens != 96 {
		t.Fatalf("second request cached %d tokens, want 96", msgs[0].CachedTokens)
	}
	if others[wire.TypeKVEvents] == 0 {
		t.Fatal("no KV events arrived")
	}
}

func TestServerErrors(t *testing.T) {
	_, addr := startServer(t, nil)
	c := dialRouter(t, addr, "")
	cases := []struct {
		mod  func(*wire.Generate)
		code wire.ErrorCode
	}{
		{func(g *wire.Generate) { g.Model = []byte("other") }, wire.CodeUnknownModel},
		{func(g *wire.Generate) { g.LoRAID = 9 }, wire.CodeUnknownLoRA},
		{func(g *wire.Generate) { g.DPRank = 4 }, wire.CodeBadRequest},
		{func(g *wire.Generate) { g.Prompt = wire.TokensOf(make([]uint32, 600*16)) }, wire.CodeBadRequest},
	}
	for i, tc := range cases {
		g := generate([]uint32{1, 2, 3}, 4)
		tc.mod(g)
		stream := uint32(10 + i)
		must(t, c.Send(stream, g))
		_, e := readStream(t, c, stream, map[wire.Type]int{})
		if e == nil || e.Code != tc.code {
			t.Fatalf("case %d: got %+v, want %s", i, e, tc.code)
		}
	}
	// A known LoRA works; the connection survived the stream errors.
	g := generate([]uint32{1, 2, 3}, 2)
	g.LoRAID = 3
	must(t, c.Send(20, g))
	if _, e := readStream(t, c, 20, map[wire.Type]int{}); e != nil {
		t.Fatalf("LoRA request: %+v", e)
	}
	// A frame a router must not send closes the connection with an ERROR.
	must(t, c.Send(0, &wire.TokensMsg{}))
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("want ERROR before close, got %v", err)
		}
		if f.Type == wire.TypeError && f.Stream == 0 {
			break
		}
	}
}

func TestServerCancel(t *testing.T) {
	_, addr := startServer(t, func(c *Config) { c.Rank.Profile = DefaultProfile; c.Speed = 1 })
	c := dialRouter(t, addr, "")
	must(t, c.Send(5, generate(make([]uint32, 64), 100000)))
	f, err := c.ReadFrame()
	for err == nil && f.Stream != 5 {
		f, err = c.ReadFrame()
	}
	must(t, err)
	must(t, c.Send(5, &wire.Cancel{Reason: wire.CancelClientGone}))
	msgs, e := readStream(t, c, 5, map[wire.Type]int{})
	if e != nil || msgs[len(msgs)-1].Finish != wire.FinishCancelled {
		t.Fatalf("cancel ended with %+v %+v", msgs[len(msgs)-1], e)
	}
}

// TestServerEventsReachEveryRouter: two routers see the same event stream,
// and one that joins late catches up from a snapshot.
func TestServerEventsReachEveryRouter(t *testing.T) {
	_, addr := startServer(t, nil)
	a := dialRouter(t, addr, "")
	b := dialRouter(t, addr, "")
	views := map[*wire.Conn]*engineView{a: newEngineView(t), b: newEngineView(t)}
	// The server starts sending a router events once it has registered the
	// connection, just after the handshake the router saw complete (a
	// router that needs what came before asks for a SNAPSHOT, as late does
	// below). Its answer to a LOAD_REQUEST shows the registration is done.
	for c, v := range views {
		must(t, c.Send(0, &wire.LoadRequest{}))
		readUntil(t, c, v, wire.TypeLoad)
	}
	prompt := make([]uint32, 64)
	for i := range 5 {
		prompt[0] = uint32(i)
		must(t, a.Send(uint32(i+1), generate(prompt, 3)))
		if _, e := readStream(t, a, uint32(i+1), map[wire.Type]int{}, views[a]); e != nil {
			t.Fatal(e)
		}
	}
	late := dialRouter(t, addr, "")
	lateView := newEngineView(t)
	must(t, late.Send(0, &wire.SnapshotRequest{SnapshotID: 1}))
	readUntil(t, late, lateView, wire.TypeSnapshot)
	// A LOAD answers at once, behind every event already sent: reading up to
	// it drains what each router has been told.
	var digests []kvstore.Digest
	for _, rc := range []struct {
		c *wire.Conn
		v *engineView
	}{{a, views[a]}, {b, views[b]}, {late, lateView}} {
		must(t, rc.c.Send(0, &wire.LoadRequest{}))
		readUntil(t, rc.c, rc.v, wire.TypeLoad)
		d, _ := rc.v.ix.Digest(rc.v.slot, kvstore.TierGPU)
		digests = append(digests, d)
	}
	if digests[0].Total != 5*4 || kvstore.Similarity(&digests[0], &digests[1]) != 1 || kvstore.Similarity(&digests[0], &digests[2]) != 1 {
		t.Fatalf("views differ: totals %d %d %d", digests[0].Total, digests[1].Total, digests[2].Total)
	}
}

// readUntil applies KV_EVENTS and SNAPSHOT frames to v until a frame of
// type stop (for SNAPSHOT: its last chunk).
func readUntil(t *testing.T, c *wire.Conn, v *engineView, stop wire.Type) {
	t.Helper()
	var snap []kvstore.Event
	for {
		f, err := c.ReadFrame()
		must(t, err)
		switch f.Type {
		case wire.TypeKVEvents:
			var m wire.KVEvents
			must(t, wire.DecodeFrame(f, &m, nil))
			must(t, v.ix.Apply(v.slot, kvEvents(m.Events)))
		case wire.TypeSnapshot:
			var m wire.Snapshot
			must(t, wire.DecodeFrame(f, &m, nil))
			snap = append(snap, kvEvents(m.Events)...)
			if m.Last {
				must(t, v.ix.Replace(v.slot, snap))
				if stop == wire.TypeSnapshot {
					return
				}
			}
		case stop:
			return
		}
	}
}

func kvEvents(evs []wire.Event) []kvstore.Event {
	out := make([]kvstore.Event, len(evs))
	for i, ev := range evs {
		out[i] = kvstore.Event{Kind: kvstore.EventKind(ev.Kind), Tier: kvstore.Tier(ev.Tier), HasParent: ev.HasParent,
			Parent: ev.Parent, Hashes: ev.Hashes.AppendTo(nil)}
	}
	return out
}

func TestServerAuthAndShutdown(t *testing.T) {
	s, addr := startServer(t, func(c *Config) { c.Secret = []byte("k"); c.DrainTimeout = 5 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Secret: []byte("wrong"), Local: wire.Handshake{Role: wire.RoleRouter}}, nil); !errors.Is(err, wire.ErrAuth) {
		t.Fatalf("wrong secret: %v", err)
	}
	c := dialRouter(t, addr, "k")
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	for {
		f, err := c.ReadFrame()
		must(t, err)
		if f.Type == wire.TypeGoaway {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
