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
// event loop, and must call w.Finish (or w.Abort) exactly once.
type Handler interface {
	ServeHTTP(w *ResponseWriter, r *Request)
}

// Config bounds what clients may make the server hold.
type Config struct {
	Addr           string
	EventLoops     int // 0: one per CPU
	MaxHeaderBytes int
	MaxBodyBytes   int
	HeaderTimeout  time.Duration // a request's header must arrive within this
	IdleTimeout    time.Duration // a keep-alive connection may wait this long
	// MaxPendingWrite bounds the bytes queued to one client; a client that
	// stops reading past it is cut off.
	MaxPendingWrite int
	// SocketSendBuffer sets SO_SNDBUF of client sockets (0: the kernel's
	// autotuning). What the kernel buffers is invisible to MaxPendingWrite.
	SocketSendBuffer int
	// KeepRaw keeps each request's bytes as sent (Request.Raw), for
	// handlers that forward requests unchanged.
	KeepRaw bool
	Logger  *slog.Logger
}

// DefaultConfig returns the server defaults.
func DefaultConfig() Config {
	return Config{Addr: "127.0.0.1:8080", MaxHeaderBytes: 64 << 10, MaxBodyBytes: 32 << 20,
		HeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxPendingWrite: 8 << 20}
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
}

type connState struct {
	c            gnet.Conn
	srv          *Server
	busy         atomic.Bool // a request is being served: later ones wait in the buffer
	closed       atomic.Bool
	continueSent bool
	since        atomic.Int64 // unix nanos: start of the partial header, or last activity when idle
	// partial: the loop last saw a request's start but not all of it in
	// the buffer. OnTick reads this instead of InboundBuffered, which only
	// the connection's own loop may call.
	partial  atomic.Bool
	pending  atomic.Int64 // bytes handed to AsyncWrite and not yet processed by the loop
	outbound atomic.Int64 // bytes gnet holds because the socket would block
	gone     chan struct{}
	remote   string
}

// NewServer returns a server; Serve runs it.
func NewServer(cfg Config, h Handler) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, h: h, log: cfg.Logger, booted: make(chan struct{}), conns: make(map[*connState]struct{})}
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
	st := &connState{c: c, srv: s, gone: make(chan struct{}), remote: c.RemoteAddr().String()}
	st.since.Store(time.Now().UnixNano())
	c.SetContext(st)
	s.mu.Lock()
	s.conns[st] = struct{}{}
	s.mu.Unlock()
	return nil, gnet.None
}

// OnClose implements gnet.EventHandler.
func (s *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	if st, ok := c.Context().(*connState); ok {
		st.closed.Store(true)
		close(st.gone)
		s.mu.Lock()
		delete(s.conns, st)
		s.mu.Unlock()
	}
	return gnet.None
}

// OnTraffic implements gnet.EventHandler: it parses at most one request and
// hands it to a goroutine; while that request is served, later pipelined
// requests stay buffered, so responses leave in request order.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*connState)
	if st.busy.Load() {
		return gnet.None
	}
	buf, _ := c.Peek(-1)
	if len(buf) == 0 {
		return gnet.None
	}
	res, perr := parse(buf, limits{maxHeader: s.cfg.MaxHeaderBytes, maxBody: s.cfg.MaxBodyBytes})
	if perr != nil {
		_, _ = c.Write(errorResponse(perr.status, perr.msg))
		return gnet.Close
	}
	if res.req == nil {
		st.partial.Store(true)
		if res.headerDone && res.expect100 && !st.continueSent {
			st.continueSent = true
			_, _ = c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
		}
		if !res.headerDone && len(buf) > 0 && st.since.Load() == 0 {
			st.since.Store(time.Now().UnixNano())
		}
		return gnet.None
	}
	if s.cfg.KeepRaw { // before Discard: buf is gnet's
		res.req.raw = append([]byte(nil), buf[:res.consumed]...)
	}
	_, _ = c.Discard(res.consumed)
	st.continueSent = false
	st.partial.Store(false)
	st.since.Store(0)
	st.busy.Store(true)
	res.req.RemoteAddr = st.remote
	w := &ResponseWriter{st: st, req: res.req, header: Header{}}
	s.active.Add(1)
	go s.h.ServeHTTP(w, res.req)
	return gnet.None
}

// OnTick closes connections that held a partial header or sat idle too long.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	now := time.Now().UnixNano()
	s.mu.Lock()
	for st := range s.conns {
		since := st.since.Load()
		if st.busy.Load() || since == 0 {
			continue
		}
		limit := s.cfg.IdleTimeout
		if st.partial.Load() {
			limit = s.cfg.HeaderTimeout
		}
		if time.Duration(now-since) > limit {
			_ = st.c.CloseWithCallback(nil)
		}
	}
	s.mu.Unlock()
	return time.Second, gnet.None
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
	return errors.Join(err, s.eng.Stop(stopCtx))
}

func errorResponse(status int, msg string) []byte {
	body := `{"error":{"message":` + strconv.Quote(msg) + `,"type":"invalid_request_error","code":null}}`
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + statusText(status) +
		"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}
