// Package serve is the engine side of the wire protocol. It accepts router
// connections, runs the handshake, keeps each connection's table of open
// streams, hands GENERATE, CANCEL, LOAD_REQUEST and SNAPSHOT_REQUEST to a
// Backend, and sends what the backend produces: TOKENS and stream errors to
// one stream, KV_EVENTS and LOAD to every router, SNAPSHOT to the router
// that asked. It also drains (GOAWAY, then wait for the backend to idle).
// kvgate-sim and kvgate-bridge are both built on it; it imports only wire.
package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Key names a request: the router connection and the stream on it.
type Key struct {
	Conn   uint64
	Stream uint32
}

// Backend is the engine behind the server.
type Backend interface {
	// Generate starts a request. g is valid only during the call. An error
	// ends the stream with an ERROR frame: a *StreamError chooses its code,
	// anything else is BAD_REQUEST.
	Generate(k Key, g *wire.Generate) error
	// Cancel stops a request: the router sent CANCEL or went away. The
	// backend may still deliver a last TOKENS frame; it is dropped when
	// nobody reads it.
	Cancel(k Key)
	// Load answers LOAD_REQUEST: one report per data-parallel rank.
	Load() []wire.Load
	// Snapshot answers SNAPSHOT_REQUEST from connection conn, now or later,
	// with SendTo(conn, SNAPSHOT frames...).
	Snapshot(conn uint64, id uint32)
	// Idle reports whether no request is running (Shutdown waits for it).
	Idle() bool
}

// Batcher is a Backend that does the work of the requests it was handed
// when their hand-over is over (perf/sim's zero-cost engine runs its
// steps there), so that what arrived in one read leaves in one write.
// EndBatch(conn) follows, on the same goroutine, every run of Generate
// and Cancel calls for connection conn: the frames of one read from the
// router, a request whose media were checked, the cancels of a router
// that went away.
type Batcher interface {
	Backend
	EndBatch(conn uint64)
}

// Config configures a Server.
type Config struct {
	Handshake    wire.Handshake
	Secret       []byte
	Limits       wire.Limits
	DrainTimeout time.Duration
	// HandshakeTimeout ends a router's handshake that has not completed
	// (0: wire.DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections held before their handshake
	// completes; at the bound the oldest is closed (wire.HandshakeGate;
	// 0: wire.DefaultMaxHandshakes).
	MaxHandshakes int
	Logger        *slog.Logger
}

// Server serves routers for one Backend.
type Server struct {
	cfg Config
	log *slog.Logger
	be  Backend

	gate *wire.HandshakeGate

	mu       sync.Mutex
	conns    map[uint64]*conn
	raw      map[net.Conn]struct{} // every accepted socket until its goroutine ends
	nextConn uint64
	draining bool
	// suspended, when not "", says why routers are refused (Suspend).
	suspended string
	lns       []net.Listener

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type conn struct {
	id uint64
	wc *wire.Conn

	mu      sync.Mutex
	streams map[uint32]struct{}
	// media are the GENERATEs waiting for their MEDIA frames, or for
	// their check (media.go).
	media mediaState
	// gen is the read loop's GENERATE, decoded anew for each: a backend
	// holds it only during its Generate call.
	gen wire.Generate
}

// New returns a server for be; Serve accepts routers.
func New(cfg Config, be Backend) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Limits.MaxFrameSize == 0 {
		cfg.Limits = wire.DefaultLimits()
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = wire.DefaultHandshakeTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Logger, be: be, gate: wire.NewHandshakeGate(cfg.MaxHandshakes),
		conns: map[uint64]*conn{}, raw: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel}
}

// Serve accepts connections on ln until Shutdown or Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return errors.New("serve: server is shutting down")
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || s.Draining() {
				return nil
			}
			return err
		}
		leave := s.gate.Enter(nc) // here, in accept order: the gate closes the oldest
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.serveConn(nc, leave) }()
	}
}

// Draining reports whether Shutdown or Close began.
func (s *Server) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// serveConn runs one router connection; leave takes it out of the
// handshake gate.
func (s *Server) serveConn(nc net.Conn, leave func()) {
	s.mu.Lock()
	if s.ctx.Err() != nil || s.suspended != "" {
		s.mu.Unlock()
		leave()
		nc.Close() // a suspended engine refuses before the handshake: never ready
		return
	}
	s.raw[nc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.raw, nc)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.HandshakeTimeout)
	wc, err := wire.Server(ctx, nc, &wire.HandshakeConfig{Local: s.cfg.Handshake, Secret: s.cfg.Secret}, &s.cfg.Limits)
	cancel()
	leave()
	if err != nil {
		s.log.Warn("router refused", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	c := &conn{wc: wc, streams: map[uint32]struct{}{}}
	s.mu.Lock()
	s.nextConn++
	c.id = s.nextConn
	s.conns[c.id] = c
	draining, suspended := s.draining, s.suspended
	s.mu.Unlock()
	if draining { // joined while Shutdown was telling everyone else
		_ = wc.Send(0, s.goaway())
	}
	if suspended != "" { // finished its handshake while Suspend closed the others
		_ = wc.SendError(0, wire.CodeShutdown, suspended)
		s.dropConn(c)
		return
	}
	s.log.Info("router connected", "router", wc.Peer.ID, "remote", nc.RemoteAddr().String())
	defer s.dropConn(c)
	handed := false // frames handled since the last endBatch
	for {
		if handed && !wc.Framed() { // about to wait for the router: finish what it sent
			s.endBatch(c)
			handed = false
		}
		f, err := wc.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("reading from router", "router", wc.Peer.ID, "err", err)
				sendErrorBeforeClose(wc, err)
			}
			return
		}
		if err := s.handleFrame(c, f); err != nil {
			s.log.Warn("closing router connection", "router", wc.Peer.ID, "err", err)
			sendErrorBeforeClose(wc, err)
			return
		}
		handed = true
	}
}

// sendErrorBeforeClose sends ERROR for err and waits until it is written
// (Send leaves it to a write another goroutine has under way, which the
// close that follows would cut short), for at most a second.
func sendErrorBeforeClose(wc *wire.Conn, err error) {
	_ = wc.NetConn.SetWriteDeadline(time.Now().Add(time.Second))
	if wc.Queue(0, &wire.Error{Code: wire.CodeOf(err), Message: err.Error()}) == nil {
		_ = wc.Sync()
	}
}

// dropConn forgets a connection and cancels its requests: nobody is left
// to read their tokens.
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
	s.stopMedia(c)
	c.mu.Lock()
	open := make([]uint32, 0, len(c.streams))
	for st := range c.streams {
		open = append(open, st)
	}
	clear(c.streams)
	c.mu.Unlock()
	for _, st := range open {
		s.be.Cancel(Key{Conn: c.id, Stream: st})
	}
	s.endBatch(c)
	c.wc.Close()
}

// endBatch tells a Batcher that c's requests handed over are complete.
func (s *Server) endBatch(c *conn) {
	if b, ok := s.be.(Batcher); ok {
		b.EndBatch(c.id)
	}
}

// handleFrame acts on one frame; an error closes the connection.
func (s *Server) handleFrame(c *conn, f wire.Frame) error {
	lim := &s.cfg.Limits
	switch f.Type {
	case wire.TypeGenerate:
		if f.Stream == 0 {
			return errors.New("GENERATE on stream 0: " + wire.ErrUnexpectedFrame.Error())
		}
		g := &c.gen
		if err := wire.DecodeFrame(f, g, lim); err != nil {
			code, ok := wire.RequestCode(err)
			if !ok {
				return err
			}
			// The frame was whole: only this request fails (PROTOCOL.md 8).
			s.refuse(c, f.Stream, code, err.Error())
			return nil
		}
		if g.Flags&wire.GenMedia != 0 {
			s.awaitMedia(c, f.Stream, g)
		} else if s.checkPlain(c, f.Stream, g) {
			s.generate(c, f.Stream, g)
		}
	case wire.TypeMedia:
		return s.mediaFrame(c, f)
	case wire.TypeCancel:
		var m wire.Cancel
		if err := wire.DecodeFrame(f, &m, lim); err != nil {
			return err
		}
		if s.cancelMedia(c, f.Stream) {
			return nil
		}
		c.mu.Lock()
		_, open := c.streams[f.Stream]
		c.mu.Unlock()
		if open { // else finished already: CANCEL raced with the last frame
			s.be.Cancel(Key{Conn: c.id, Stream: f.Stream})
		}
	case wire.TypePing:
		var p wire.Ping
		if err := wire.DecodeFrame(f, &p, lim); err != nil {
			return err
		}
		return c.wc.Send(0, &wire.Pong{Data: p.Data})
	case wire.TypePong:
	case wire.TypeLoadRequest:
		for _, l := range s.be.Load() {
			if err := c.wc.Queue(0, &l); err != nil {
				return err
			}
		}
		return c.wc.Flush()
	case wire.TypeSnapshotRequest:
		var m wire.SnapshotRequest
		if err := wire.DecodeFrame(f, &m, lim); err != nil {
			return err
		}
		s.be.Snapshot(c.id, m.SnapshotID)
	case wire.TypeGoaway:
		s.log.Info("router going away", "router", c.wc.Peer.ID)
	case wire.TypeError:
		var e wire.Error
		if err := wire.DecodeFrame(f, &e, lim); err != nil {
			return err
		}
		if f.Stream == 0 {
			return e.AsError(0)
		}
	default:
		return errors.New(f.Type.String() + " from a router: " + wire.ErrUnexpectedFrame.Error())
	}
	return nil
}

// refuse ends a GENERATE that cannot run with a stream ERROR, unless its
// stream is open: then the open stream goes on and the router hears
// DUPLICATE_STREAM, as for any GENERATE on an open stream.
func (s *Server) refuse(c *conn, stream uint32, code wire.ErrorCode, msg string) {
	c.mu.Lock()
	_, open := c.streams[stream]
	open = open || c.checking(stream)
	c.mu.Unlock()
	if open {
		code, msg = wire.CodeDuplicate, "stream is open"
	}
	s.log.Info("refusing a request", "router", c.wc.Peer.ID, "stream", stream, "code", code.String(), "err", msg)
	_ = c.wc.SendError(stream, code, msg)
}

// Handshaking returns how many connections are in their handshake now.
func (s *Server) Handshaking() int { return s.gate.Pending() }

func (s *Server) generate(c *conn, stream uint32, g *wire.Generate) {
	if s.Draining() {
		_ = c.wc.SendError(stream, wire.CodeOverloaded, "engine is draining")
		return
	}
	c.mu.Lock()
	if _, open := c.streams[stream]; open || c.checking(stream) {
		c.mu.Unlock()
		_ = c.wc.SendError(stream, wire.CodeDuplicate, "stream is open")
		return
	}
	c.streams[stream] = struct{}{}
	c.mu.Unlock()
	s.start(c, stream, g)
}

// start hands the backend a request whose stream is open.
func (s *Server) start(c *conn, stream uint32, g *wire.Generate) {
	if err := s.be.Generate(Key{Conn: c.id, Stream: stream}, g); err != nil {
		c.mu.Lock()
		delete(c.streams, stream)
		c.mu.Unlock()
		se := &StreamError{Code: wire.CodeBadRequest, Message: err.Error()}
		errors.As(err, &se)
		_ = c.wc.SendError(stream, se.Code, se.Message)
	}
}

// StreamError is a Backend's refusal of one request, with its wire code.
type StreamError struct {
	Code    wire.ErrorCode
	Message string
}

func (e *StreamError) Error() string { return e.Code.String() + ": " + e.Message }
