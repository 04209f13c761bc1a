package engine

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// ttResponder owns a connection's frames for a pool that PINGs: it
// answers each PING while answer is set (an engine that runs) and passes
// every other frame on.
type ttResponder struct {
	c      *ttConn
	answer atomic.Bool
	frames chan wire.Frame
}

func ttRespond(c *ttConn) *ttResponder {
	r := &ttResponder{c: c, frames: make(chan wire.Frame, 4096)}
	r.answer.Store(true)
	go func() {
		defer close(r.frames)
		for f := range c.frames {
			if f.Type != wire.TypePing {
				r.frames <- f
				continue
			}
			var p wire.Ping
			if r.answer.Load() && wire.DecodeFrame(f, &p, nil) == nil {
				_ = c.Send(0, &wire.Pong{Data: p.Data})
			}
		}
	}()
	return r
}

// next returns the next frame other than PING.
func (r *ttResponder) next(t testing.TB, typ wire.Type) wire.Frame {
	t.Helper()
	select {
	case f, ok := <-r.frames:
		if !ok || f.Type != typ {
			t.Fatalf("router sent %s on stream %d (open %v), want %s", f.Type, f.Stream, ok, typ)
		}
		return f
	case <-time.After(ttWait):
		t.Fatalf("after %v: no %s from the router", ttWait, typ)
	}
	return wire.Frame{}
}

// open sends a GENERATE on e and returns its stream.
func (r *ttResponder) open(t testing.TB, e *Engine) *Stream {
	t.Helper()
	s, err := e.Generate(ttGenerate("m"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if f := r.next(t, wire.TypeGenerate); f.Stream != s.id {
		t.Fatalf("GENERATE on stream %d, the stream is %d", f.Stream, s.id)
	}
	return s
}

// ttLast waits for a stream's last event and returns its error.
func ttLast(t testing.TB, s *Stream) error {
	t.Helper()
	evs := ttCollect(t, s)
	return evs[len(evs)-1].Err
}

// TestUnresponsiveEngine: an engine that answers no PING for PingTimeout
// (here it answers nothing: a SIGSTOPped engine) is not ready; its
// streams, started or not, end with ErrUnresponsive, which is
// ErrEngineDown so the gateway re-routes those before their first token,
// and are cancelled on it; their ids stay taken until it ends them. Its
// next frame makes it ready again on the same connection.
func TestUnresponsiveEngine(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("e"), nil)
	p, lg := ttPool(t, func(c *Config) {
		c.PingInterval, c.PingTimeout, c.DropAfter = 20*time.Millisecond, time.Second, time.Hour
	}, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	r := ttRespond(c)
	waiting := r.open(t, e)
	started := r.open(t, e)
	c.send(t, started.id, ttTok(wire.TokFirst, 0, 7))
	ttWaitFor(t, "the first token", func() bool { return started.started.Load() })
	r.answer.Store(false) // SIGSTOP
	ttWaitFor(t, "unresponsive", func() bool { return e.State() == StateUnresponsive })
	for _, s := range []*Stream{waiting, started} {
		if err := ttLast(t, s); !errors.Is(err, ErrUnresponsive) || !errors.Is(err, ErrEngineDown) {
			t.Errorf("stream %d ended with %v, want ErrUnresponsive and ErrEngineDown", s.id, err)
		}
	}
	cancelled := map[uint32]bool{}
	for len(cancelled) < 2 {
		var m wire.Cancel
		f := r.next(t, wire.TypeCancel)
		if wire.DecodeFrame(f, &m, nil) != nil || m.Reason != wire.CancelTimeout {
			t.Fatalf("CANCEL %+v on stream %d, want reason timeout", m, f.Stream)
		}
		cancelled[f.Stream] = true
	}
	if !cancelled[waiting.id] || !cancelled[started.id] {
		t.Fatalf("cancelled %v, want streams %d and %d", cancelled, waiting.id, started.id)
	}
	if _, err := e.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Generate on an unresponsive engine: %v, want ErrNotReady", err)
	}

	r.answer.Store(true) // SIGCONT: the next PING is answered
	ttReady(t, e)
	c.send(t, waiting.id, ttTok(wire.TokLast, wire.FinishCancelled)) // its late answers are dropped
	c.send(t, started.id, ttTok(wire.TokLast, wire.FinishCancelled))
	ttWaitFor(t, "the engine's ends of the abandoned streams", func() bool { return e.OpenStreams() == 0 })
	if got := waiting.Take(); got != nil {
		t.Errorf("an ended stream got %+v", got)
	}
	s := r.open(t, e) // the same connection serves on
	c.send(t, s.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 1))
	if err := ttLast(t, s); err != nil {
		t.Fatalf("stream after the engine woke: %v", err)
	}
	select {
	case nc := <-eng.accepted:
		t.Fatalf("the router reconnected (%v): it should have kept the connection", nc.NetConn.RemoteAddr())
	default:
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.lost) != 0 {
		t.Fatalf("connection lost: %v", lg.lost)
	}
}

// TestIdsOfAbandonedStreamsNotReused: while the engine has not ended a
// stream the router gave up on, its id is not given to a new one.
func TestIdsOfAbandonedStreamsNotReused(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("e"), nil)
	p, _ := ttPool(t, func(c *Config) { c.TokenTimeout = 50 * time.Millisecond }, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	s, _ := ttOpen(t, e, c)
	c.send(t, s.id, ttTok(wire.TokFirst, 0, 1))
	if err := ttLast(t, s); !errors.Is(err, ErrTokenTimeout) {
		t.Fatalf("%v, want ErrTokenTimeout", err)
	}
	c.expect(t, &wire.Cancel{})
	e.mu.Lock()
	e.nextStream = s.id - 1 // the next id would be s's
	e.mu.Unlock()
	s2, _ := ttOpen(t, e, c)
	if s2.id == s.id {
		t.Fatalf("stream id %d reused while the engine still runs it", s.id)
	}
}

// TestTokenTimeout: a started stream without a frame for TokenTimeout
// ends with ErrTokenTimeout and is cancelled; a stream still waiting for
// its first token (the gateway's first-token timeout) and the engine are
// untouched.
func TestTokenTimeout(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("e"), nil)
	p, _ := ttPool(t, func(c *Config) { c.TokenTimeout = 100 * time.Millisecond }, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	quiet, _ := ttOpen(t, e, c)
	waiting, _ := ttOpen(t, e, c)
	c.send(t, quiet.id, ttTok(wire.TokFirst, 0, 1))
	if err := ttLast(t, quiet); !errors.Is(err, ErrTokenTimeout) || errors.Is(err, ErrEngineDown) {
		t.Fatalf("quiet stream ended with %v, want ErrTokenTimeout only", err)
	}
	var m wire.Cancel
	if f := c.expect(t, &wire.Cancel{}); f.Stream != quiet.id || wire.DecodeFrame(f, &m, nil) != nil || m.Reason != wire.CancelTimeout {
		t.Fatalf("CANCEL %+v on stream %d, want timeout on %d", m, f.Stream, quiet.id)
	}
	if !e.Ready() {
		t.Fatalf("engine %v after one stream's timeout", e.State())
	}
	if got := waiting.Take(); got != nil {
		t.Fatalf("the stream without a first token got %+v", got)
	}
}

// TestRequestErrorKeepsConnection: a stream ERROR for one request (here
// REQUEST_LIMIT) ends that stream only; a GENERATE over the router's own
// limits is refused without being sent.
func TestRequestErrorKeepsConnection(t *testing.T) {
	_, _, e, c := ttConnected(t)
	bad, _ := ttOpen(t, e, c)
	good, _ := ttOpen(t, e, c)
	c.send(t, bad.id, &wire.Error{Code: wire.CodeRequestLimit, Message: "stop_token_ids over 1024"})
	var re *wire.RemoteError
	if err := ttLast(t, bad); !errors.As(err, &re) || re.Code != wire.CodeRequestLimit || errors.Is(err, ErrEngineDown) {
		t.Fatalf("refused stream ended with %v, want a RemoteError REQUEST_LIMIT", err)
	}
	g := ttGenerate("m")
	g.StopTokens = wire.TokensOf(make([]uint32, wire.DefaultMaxStopTokens+1))
	if _, err := e.Generate(g); !errors.Is(err, wire.ErrLimit) {
		t.Fatalf("Generate over the limits: %v, want wire.ErrLimit", err)
	}
	c.send(t, good.id, ttTok(wire.TokFirst|wire.TokLast, wire.FinishStop, 9))
	if err := ttLast(t, good); err != nil || !e.Ready() {
		t.Fatalf("the other stream: %v, engine %v", err, e.State())
	}
	ttOpen(t, e, c) // the next frame the engine gets is this GENERATE: the refused one never left
}

// TestWriteTimeout: an engine that stops reading makes a write time out
// after WriteTimeout; the connection ends (the request's error is
// ErrEngineDown) and the router redials.
func TestWriteTimeout(t *testing.T) {
	held, quit := make(chan struct{}, 16), make(chan struct{})
	addr := ttListen(t, func(nc net.Conn) {
		ctx, cancel := context.WithTimeout(context.Background(), ttWait)
		defer cancel()
		if _, err := wire.Server(ctx, nc, &wire.HandshakeConfig{Local: ttHandshake("e")}, nil); err != nil {
			return
		}
		held <- struct{}{}
		<-quit // never read again
	})
	t.Cleanup(func() { close(quit) }) // runs before ttListen's, which waits for the handlers
	p, _ := ttPool(t, func(c *Config) { c.WriteTimeout = 100 * time.Millisecond }, addr)
	e := p.Engines()[0]
	ttReady(t, e)
	<-held
	g := ttGenerate("m")
	g.Prompt = wire.TokensOf(make([]uint32, wire.DefaultMaxTokens)) // 4 MiB a frame
	var err error
	deadline := time.Now().Add(ttWait)
	for err == nil && time.Now().Before(deadline) {
		_, err = e.Generate(g)
	}
	if !errors.Is(err, ErrEngineDown) {
		t.Fatalf("writing to an engine that does not read: %v, want ErrEngineDown", err)
	}
	select {
	case <-held: // redialed and handshaken again
	case <-time.After(ttWait):
		t.Fatal("the router did not redial after the write timeout")
	}
}

// TestConfigValidate: the defaults pass; timeouts that cannot work do not.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no token timeout", func(c *Config) { c.TokenTimeout = 0 }, true},
		{"no ping interval", func(c *Config) { c.PingInterval = 0 }, false},
		{"no ping timeout", func(c *Config) { c.PingTimeout = 0 }, false},
		{"drop before unresponsive", func(c *Config) { c.DropAfter = c.PingTimeout / 2 }, false},
		{"negative token timeout", func(c *Config) { c.TokenTimeout = -time.Second }, false},
		{"no write timeout", func(c *Config) { c.WriteTimeout = 0 }, false},
		{"bad limits", func(c *Config) { c.Limits.MaxFrameSize = 1 }, false},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
