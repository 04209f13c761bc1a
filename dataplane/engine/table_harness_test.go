package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// The table tests talk to the pool over real loopback sockets. Their engine
// side is ttEngine: wire.Server's handshake on each accepted connection,
// then every frame the router sends copied onto a channel, so a test waits
// for a frame (or for the router to hang up) instead of sleeping, and
// answers with whatever frames the case needs. wire/serve is the engine in
// the cases that want the library every engine is built on.

// ttWait bounds every wait of these tests: generous, since the machines
// running them are shared; a passing test never comes near it.
const ttWait = 10 * time.Second

// ttWaitFor polls cond until it holds, failing the test after ttWait.
func ttWaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ttWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: still waiting for %s", ttWait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ttHandshake is an engine's announcement as most cases want it.
func ttHandshake(id string) wire.Handshake {
	return wire.Handshake{Role: wire.RoleEngine, ID: id, HashScheme: wire.HashXXH3Chained, BlockSize: 16,
		MaxBatchedTokens: 8192, HashSeed: 7, Models: []string{"m"},
		Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: 1000}}}
}

// ttEngine is a scripted engine on a loopback listener.
type ttEngine struct {
	addr string

	mu     sync.Mutex
	ln     net.Listener
	hs     wire.Handshake // announced to the next router
	secret []byte
	socks  []net.Conn
	closed bool

	accepted chan *ttConn // connections whose handshake succeeded
	refused  chan error   // the engine side's handshake errors
	// hungUp counts routers that closed before sending their HELLO: not
	// a refusal by the engine; the pool redials (seen once in CI under
	// load, cause not found), and accept logs how many there were.
	hungUp atomic.Int32
	quit   chan struct{} // closed when the test ends: nothing waits on a full channel then
	wg     sync.WaitGroup
}

// ttConn is one router connection of a ttEngine.
type ttConn struct {
	*wire.Conn
	frames chan wire.Frame // what the router sent, payloads copied; closed when it hangs up
	err    error           // why reading stopped; set before frames closes
}

// ttStartEngine listens on a random loopback port; the engine and every
// connection it accepted close when the test ends.
func ttStartEngine(t testing.TB, hs wire.Handshake, secret []byte) *ttEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &ttEngine{addr: ln.Addr().String(), hs: hs, secret: secret,
		accepted: make(chan *ttConn, 16), refused: make(chan error, 16), quit: make(chan struct{})}
	e.serve(ln)
	t.Cleanup(e.close)
	return e
}

func (e *ttEngine) serve(ln net.Listener) {
	e.mu.Lock()
	e.ln = ln
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if !e.track(nc) {
				nc.Close()
				return
			}
			e.wg.Add(1)
			go func() { defer e.wg.Done(); e.handshake(nc) }()
		}
	}()
}

func (e *ttEngine) track(nc net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.socks = append(e.socks, nc)
	return true
}

func (e *ttEngine) handshake(nc net.Conn) {
	e.mu.Lock()
	cfg := &wire.HandshakeConfig{Local: e.hs, Secret: e.secret}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), ttWait)
	wc, err := wire.Server(ctx, nc, cfg, nil)
	cancel()
	if err != nil && errors.Is(err, io.EOF) && strings.Contains(err.Error(), "reading HELLO") {
		nc.Close()
		e.hungUp.Add(1)
		return
	}
	if err != nil {
		nc.Close()
		select {
		case e.refused <- err:
		case <-e.quit:
		}
		return
	}
	c := &ttConn{Conn: wc, frames: make(chan wire.Frame, 4096)}
	select {
	case e.accepted <- c:
	case <-e.quit:
		return
	}
	defer close(c.frames)
	for {
		f, err := wc.ReadFrame()
		if err != nil {
			c.err = err
			return
		}
		f.Payload = bytes.Clone(f.Payload)
		select {
		case c.frames <- f:
		case <-e.quit:
			return
		}
	}
}

// setHandshake changes what the engine announces to the next router.
func (e *ttEngine) setHandshake(hs wire.Handshake) {
	e.mu.Lock()
	e.hs = hs
	e.mu.Unlock()
}

// accept returns the next router connection that passed the handshake.
func (e *ttEngine) accept(t testing.TB) *ttConn {
	t.Helper()
	select {
	case c := <-e.accepted:
		if n := e.hungUp.Load(); n > 0 {
			t.Logf("%d router connection(s) to %s closed before their HELLO; the pool redialed", n, e.addr)
		}
		return c
	case err := <-e.refused:
		t.Fatalf("engine side refused the router: %v", err)
	case <-time.After(ttWait):
		t.Fatalf("after %v: no router connected to %s", ttWait, e.addr)
	}
	return nil
}

// stop is the engine process dying: the listener and every socket close.
func (e *ttEngine) stop() {
	e.mu.Lock()
	if e.ln != nil {
		e.ln.Close()
		e.ln = nil
	}
	socks := e.socks
	e.socks = nil
	e.mu.Unlock()
	for _, nc := range socks {
		nc.Close()
	}
}

// restart is the engine coming back on the same address.
func (e *ttEngine) restart(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", e.addr, err)
	}
	e.serve(ln)
}

func (e *ttEngine) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	close(e.quit)
	e.stop()
	e.wg.Wait()
}

// next returns the next frame the router sent.
func (c *ttConn) next(t testing.TB) wire.Frame {
	t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			t.Fatalf("the router hung up: %v", c.err)
		}
		return f
	case <-time.After(ttWait):
		t.Fatalf("after %v: no frame from the router", ttWait)
	}
	return wire.Frame{}
}

// expect returns the next frame the router sent, decoded into m, which
// must be its type.
func (c *ttConn) expect(t testing.TB, m wire.Message) wire.Frame {
	t.Helper()
	f := c.next(t)
	if err := wire.DecodeFrame(f, m, nil); err != nil {
		t.Fatalf("router sent %s on stream %d, want %s: %v", f.Type, f.Stream, m.Type(), err)
	}
	return f
}

// hangup waits for the router to close the connection and returns the
// frames it sent before.
func (c *ttConn) hangup(t testing.TB) []wire.Frame {
	t.Helper()
	var fs []wire.Frame
	timeout := time.After(ttWait)
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return fs
			}
			fs = append(fs, f)
		case <-timeout:
			t.Fatalf("after %v: the router keeps the connection open (frames so far: %d)", ttWait, len(fs))
		}
	}
}

// send sends m, failing the test on error.
func (c *ttConn) send(t testing.TB, stream uint32, m wire.Message) {
	t.Helper()
	if err := c.Send(stream, m); err != nil {
		t.Fatalf("sending %s: %v", m.Type(), err)
	}
}

// ttLog records the pool's log, so a test can see why a connection failed:
// the pool says so only there.
type ttLog struct {
	mu   sync.Mutex
	lost []error // the err of each "engine connection lost"
	more chan struct{}
}

func (l *ttLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *ttLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *ttLog) WithGroup(string) slog.Handler            { return l }

func (l *ttLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "engine connection lost" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
			l.mu.Lock()
			l.lost = append(l.lost, err)
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
		return true
	})
	return nil
}

// firstLoss waits for the first connection failure the pool logged.
func (l *ttLog) firstLoss(t testing.TB) error {
	t.Helper()
	ttWaitFor(t, "a connection failure in the log", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.lost) > 0
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[0]
}

// ttPool is a pool on a fresh index with its log recorded; it closes when
// the test ends. mod adjusts the configuration.
func ttPool(t testing.TB, mod func(*Config), addrs ...string) (*Pool, *ttLog) {
	t.Helper()
	lg := &ttLog{more: make(chan struct{}, 1)}
	cfg := DefaultConfig()
	cfg.RouterID = "tt-router"
	cfg.PingInterval = time.Hour // no PING unless a case asks: the scripted engines answer none
	// Most scripted engines with the SNAPSHOT feature answer no request:
	// they take requests soon after their handshake, as before snapshots
	// held admission (TestAdmittedAfterSnapshot sets its own wait).
	cfg.SnapshotWait = 20 * time.Millisecond
	cfg.Logger = slog.New(lg)
	if mod != nil {
		mod(&cfg)
	}
	p := NewPool(cfg, kvstore.New(kvstore.Options{}), addrs)
	t.Cleanup(p.Close)
	return p, lg
}

// ttReady waits until e is ready.
func ttReady(t testing.TB, e *Engine) {
	t.Helper()
	ttWaitFor(t, e.Addr+" ready", e.Ready)
}

// ttGenerate is a small valid GENERATE.
func ttGenerate(model string) *wire.Generate {
	return &wire.Generate{RequestID: []byte("req"), Model: []byte(model), MaxTokens: 8, TopP: 1,
		DPRank: wire.AnyRank, Prompt: wire.TokensOf([]uint32{1, 2, 3, 4})}
}

// ttOpen sends a GENERATE on e and returns the stream with the frame the
// engine received.
func ttOpen(t testing.TB, e *Engine, c *ttConn) (*Stream, wire.Frame) {
	t.Helper()
	s, err := e.Generate(ttGenerate("m"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var g wire.Generate
	f := c.expect(t, &g)
	if f.Stream != s.id {
		t.Fatalf("GENERATE on stream %d, the stream is %d", f.Stream, s.id)
	}
	return s, f
}

// ttCollect takes a stream's events up to and including the last one.
func ttCollect(t testing.TB, s *Stream) []Event {
	t.Helper()
	var evs []Event
	for {
		select {
		case <-s.Ready():
		case <-time.After(ttWait):
			t.Fatalf("after %v: stream %d has no last event (events so far: %+v)", ttWait, s.id, evs)
		}
		for _, ev := range s.Take() {
			evs = append(evs, ev)
			if ev.Last {
				if more := s.Take(); len(more) > 0 {
					t.Fatalf("stream %d: events after the last: %+v", s.id, more)
				}
				return evs
			}
		}
	}
}

// ttTokens concatenates the tokens of events.
func ttTokens(evs []Event) []uint32 {
	var out []uint32
	for _, ev := range evs {
		out = append(out, ev.Tokens...)
	}
	return out
}

// ttHeld returns how many leading blocks of hashes slot holds, per tier.
func ttHeld(ix *kvstore.Index, slot kvstore.Slot, hashes []uint64) kvstore.Match {
	out := make([]kvstore.Match, 1)
	ix.Match(hashes, []kvstore.Slot{slot}, out)
	return out[0]
}

// ttErrIs reports whether err matches target (a nil target: err is nil).
func ttErrIs(err, target error) bool {
	if target == nil {
		return err == nil
	}
	return errors.Is(err, target)
}

// ttListen serves handle on each connection to a random loopback port
// until the test ends; the listener and the sockets close then.
func ttListen(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		socks []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			socks = append(socks, nc)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); handle(nc) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range socks {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// ttDeadAddr returns a loopback address nothing listens on (a random port,
// listened on and closed).
func ttDeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ttConnected is the common start of a case: a scripted engine named "e",
// a pool connected to it, and the engine ready.
func ttConnected(t testing.TB) (*ttEngine, *Pool, *Engine, *ttConn) {
	t.Helper()
	eng := ttStartEngine(t, ttHandshake("e"), nil)
	p, _ := ttPool(t, nil, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	return eng, p, e, c
}
