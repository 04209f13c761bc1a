package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// Handler serves one request. It runs on its own goroutine, never on an
// event loop, and should call w.Finish (or w.Abort) exactly once; the
// server aborts a response its handler returned from without finishing,
// and answers 500 for a handler that panicked.
type Handler interface {
	ServeHTTP(w *ResponseWriter, r *Request)
}

// Config bounds what clients may make the server hold.
type Config struct {
	Addr           string
	EventLoops     int // 0: one per CPU
	MaxHeaderBytes int // a request's header, and its chunked trailers
	MaxBodyBytes   int
	// HeaderTimeout bounds the time from a request's first byte to the
	// end of its header.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the time from the end of a request's header to
	// the end of its body: an upload has this long, not HeaderTimeout.
	BodyTimeout time.Duration
	IdleTimeout time.Duration // a keep-alive connection may wait this long
	// PipelineWindow bounds what a client may send ahead while one of its
	// requests is served: past it the server stops reading the socket
	// until the request in service ends (TCP backpressure); a client that
	// forces more than 16 windows in anyway is cut off.
	PipelineWindow int
	// MaxPendingWrite bounds the bytes queued to one client. A streamed
	// response to a client that lets more pile up is cut off; a whole
	// response larger than it is written as the client reads.
	MaxPendingWrite int
	// WriteStallTimeout is how long a whole response may wait for a client
	// that reads nothing before the client is cut off.
	WriteStallTimeout time.Duration
	// SocketSendBuffer sets SO_SNDBUF of client sockets (0: the kernel's
	// autotuning). What the kernel buffers is invisible to MaxPendingWrite.
	SocketSendBuffer int
	// MaxConns bounds the client connections held at once: one past it
	// is answered 503 and closed. Each holds one request in service at a
	// time, so it bounds streams in flight too.
	MaxConns int
	// KeepRaw keeps each request's bytes as sent (Request.Raw), for
	// handlers that forward requests unchanged.
	KeepRaw bool
	Logger  *slog.Logger
}

// DefaultConfig returns the server defaults.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:8080", MaxHeaderBytes: 64 << 10, MaxBodyBytes: 32 << 20,
		HeaderTimeout: 10 * time.Second, BodyTimeout: 5 * time.Minute, IdleTimeout: 120 * time.Second,
		PipelineWindow: 64 << 10, MaxPendingWrite: 8 << 20, WriteStallTimeout: 30 * time.Second, MaxConns: 65536}
}

// Validate reports a limit that would leave the server unbounded.
func (c *Config) Validate() error {
	if c.MaxHeaderBytes <= 0 || c.MaxBodyBytes <= 0 || c.PipelineWindow <= 0 || c.MaxPendingWrite <= 0 || c.MaxConns <= 0 {
		return errors.New("httpx: header, body, pipeline window, pending-write and connection limits must be positive")
	}
	if c.HeaderTimeout <= 0 || c.BodyTimeout <= 0 || c.IdleTimeout <= 0 || c.WriteStallTimeout <= 0 {
		return errors.New("httpx: header, body, idle and write-stall timeouts must be positive")
	}
	return nil
}

// Server is an HTTP/1.1 server on gnet.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	h       Handler
	log     *slog.Logger
	eng     gnet.Engine
	addr    string
	booted  chan struct{}
	mu      sync.Mutex
	conns   map[*connState]struct{}
	active  atomic.Int64 // requests being served
	closing atomic.Bool
	workers *workers

	flushers map[gnet.EventLoop]*flusher // the event loops' write lists (outq.go), under mu
}

// NewServer returns a server; Serve runs it. Zero limits take DefaultConfig's.
func NewServer(cfg Config, h Handler) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	def := DefaultConfig()
	for _, f := range []struct{ v, d *int }{{&cfg.MaxHeaderBytes, &def.MaxHeaderBytes}, {&cfg.MaxBodyBytes, &def.MaxBodyBytes},
		{&cfg.PipelineWindow, &def.PipelineWindow}, {&cfg.MaxPendingWrite, &def.MaxPendingWrite}, {&cfg.MaxConns, &def.MaxConns}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *time.Duration }{{&cfg.HeaderTimeout, &def.HeaderTimeout}, {&cfg.BodyTimeout, &def.BodyTimeout},
		{&cfg.IdleTimeout, &def.IdleTimeout}, {&cfg.WriteStallTimeout, &def.WriteStallTimeout}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return &Server{cfg: cfg, h: h, log: cfg.Logger, booted: make(chan struct{}), conns: make(map[*connState]struct{}), workers: newWorkers()}
}

// Serve listens and serves until Shutdown. A port of 0 is resolved to a
// free port first; Addr reports it.
func (s *Server) Serve() error {
	addr := s.cfg.Addr
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("httpx: %w", err)
	}
	if port == "0" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("httpx: %w", err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	s.addr = net.JoinHostPort(host, portOf(addr))
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithTicker(true), gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay), gnet.WithLogger(gnetLogger{s.log}), gnet.WithLogLevel(logging.WarnLevel)}
	if s.cfg.EventLoops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(s.cfg.EventLoops))
	}
	if s.cfg.SocketSendBuffer > 0 {
		opts = append(opts, gnet.WithSocketSendBuffer(s.cfg.SocketSendBuffer))
	}
	return gnet.Run(s, "tcp://"+s.addr, opts...)
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Addr returns the listening address once Serve has booted.
func (s *Server) Addr() string { return s.addr }

// Booted is closed when the server accepts connections.
func (s *Server) Booted() <-chan struct{} { return s.booted }

// Conns returns the number of client connections held.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Active returns the number of requests being served.
func (s *Server) Active() int64 { return s.active.Load() }

// OnBoot implements gnet.EventHandler.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	close(s.booted)
	return gnet.None
}

// OnOpen implements gnet.EventHandler.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.closing.Load() {
		return nil, gnet.Close
	}
	s.mu.Lock()
	full := len(s.conns) >= s.cfg.MaxConns
	s.mu.Unlock()
	if full {
		s.log.Warn("connection refused: at --max-conns", "remote", c.RemoteAddr().String(), "max", s.cfg.MaxConns)
		return errorResponse(503, "too many connections"), gnet.Close
	}
	st := &connState{c: c, fd: c.Fd(), srv: s, gone: make(chan struct{}), remote: c.RemoteAddr().String(),
		rd: reader{lim: limits{maxHeader: s.cfg.MaxHeaderBytes, maxBody: s.cfg.MaxBodyBytes}, keepRaw: s.cfg.KeepRaw}}
	st.fl = s.flusherOf(c.EventLoop())
	st.setPhase(phaseIdle)
	c.SetContext(st)
	s.mu.Lock()
	s.conns[st] = struct{}{}
	s.mu.Unlock()
	return nil, gnet.None
}

// OnClose implements gnet.EventHandler.
func (s *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	if st, ok := c.Context().(*connState); ok {
		st.q.mu.Lock()
		st.closed.Store(true) // no direct write after this: gnet closes the socket once OnClose returns (direct.go)
		st.q.mu.Unlock()
		st.rd = reader{} // what it held goes at once
		close(st.gone)
		s.mu.Lock()
		delete(s.conns, st)
		s.mu.Unlock()
	}
	return gnet.None
}

// OnTick, once a second, ends handler goroutines idle for too long and
// closes connections whose header, body or idle wait ran out: those that
// were sending a request get a 408 first. The decision is
// taken again on the connection's loop (expiry), where no handler writes
// while it reads a request.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.workers.tick()
	now := time.Now().UnixNano()
	s.mu.Lock()
	for st := range s.conns {
		if _, over := st.overdue(now); over && st.timedOut.CompareAndSwap(false, true) {
			if st.fl.loop.Execute(context.Background(), expiry{st}) != nil {
				st.timedOut.Store(false) // the engine is stopping
			}
		}
	}
	s.mu.Unlock()
	return time.Second, gnet.None
}

// overdue reports the connection's phase and whether its wait ran out.
func (st *connState) overdue(now int64) (int32, bool) {
	phase, since := st.phaseNow()
	var limit time.Duration
	switch phase {
	case phaseIdle:
		limit = st.srv.cfg.IdleTimeout
	case phaseHeader:
		limit = st.srv.cfg.HeaderTimeout
	case phaseBody:
		limit = st.srv.cfg.BodyTimeout
	default:
		return phase, false
	}
	return phase, time.Duration(now-since) > limit
}

// expiry closes a connection whose wait ran out, on its loop.
type expiry struct{ st *connState }

// Run implements gnet.Runnable.
func (e expiry) Run(context.Context) error {
	st := e.st
	if st.closed.Load() {
		return nil
	}
	phase, over := st.overdue(time.Now().UnixNano())
	if !over { // a request arrived in time after all
		st.timedOut.Store(false)
		return nil
	}
	if phase != phaseIdle {
		st.loopWrite(errorResponse(408, "request not received in time"))
	}
	_ = st.c.Close()
	return nil
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// and stops the event loops.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var err error
wait:
	for s.active.Load() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-t.C:
		}
	}
	select {
	case <-s.booted:
	default:
		return errors.Join(err, errors.New("httpx: server never booted"))
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = errors.Join(err, s.eng.Stop(stopCtx))
	s.workers.stop(stopCtx.Done())
	return err
}

func errorResponse(status int, msg string) []byte {
	body := `{"error":{"message":` + strconv.Quote(msg) + `,"type":"invalid_request_error","param":null,"code":null}}`
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + statusText(status) +
		"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}
