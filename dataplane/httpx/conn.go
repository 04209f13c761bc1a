package httpx

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// connState is one client connection. The reader and the read gate
// belong to the connection's event loop; the rest is shared with the
// handler's goroutine and OnTick through atomics.
type connState struct {
	c            gnet.Conn
	fd           int // c's socket, for direct writes (direct.go)
	srv          *Server
	busy         atomic.Bool // a request is being served: later ones wait
	held         atomic.Bool // bytes wait in gnet's buffer for the request in service to end
	closed       atomic.Bool // set under q.mu (direct.go)
	timedOut     atomic.Bool
	continueSent bool
	rd           reader
	gate         readGate
	// phase and since (unix nanos) say what the connection waits for and
	// from when: OnTick reads them instead of gnet's buffers, which only
	// the connection's own loop may read.
	phase    atomic.Int32
	since    atomic.Int64
	pending  atomic.Int64 // bytes queued or handed to AsyncWrite and not yet processed by the loop
	outbound atomic.Int64 // bytes gnet holds because the socket would block
	q        writeQueue   // a streamed response's bytes for the loop (outq.go)
	fl       *flusher     // the loop's list of connections to write
	gone     chan struct{}
	remote   string
}

// Phases of a connection, for its timeouts.
const (
	phaseIdle   = iota // between requests: IdleTimeout
	phaseHeader        // a request's header is arriving: HeaderTimeout from its first byte
	phaseBody          // its body is arriving: BodyTimeout from the header's end
	phaseServe         // a handler serves it: no read timeout
)

func (st *connState) setPhase(p int32) {
	st.since.Store(time.Now().UnixNano())
	st.phase.Store(p)
}

func (st *connState) phaseNow() (int32, int64) { return st.phase.Load(), st.since.Load() }

// OnTraffic implements gnet.EventHandler: it parses at most one request and
// hands it to a goroutine; while that request is served, later pipelined
// requests wait, and past PipelineWindow the socket is not read at all.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	st := c.Context().(*connState)
	for {
		if st.busy.Load() {
			if a := st.holdPipelined(); a != gnet.None || !st.held.Load() || st.busy.Load() {
				return a
			}
			continue // the request ended after held was set: its end may not have seen it
		}
		st.held.Store(false)
		st.gate.resume(c)
		buf, _ := c.Peek(-1)
		if len(buf) == 0 {
			return gnet.None
		}
		n, req, perr := st.rd.feed(buf)
		_, _ = c.Discard(n)
		if perr != nil {
			st.loopWrite(errorResponse(perr.status, perr.msg))
			return gnet.Close
		}
		if req == nil {
			st.waiting()
			return gnet.None
		}
		st.continueSent = false
		if s.closing.Load() {
			st.loopWrite(errorResponse(503, "server shutting down"))
			return gnet.Close
		}
		st.busy.Store(true)
		st.phase.Store(phaseServe) // no timeout while served: since is not read, and not worth a clock read
		req.RemoteAddr = st.remote
		w := &req.w
		*w = ResponseWriter{st: st, req: req}
		w.header = w.fields[:0]
		s.active.Add(1)
		s.dispatch(w, req)
	}
}

// waiting records what an incomplete request waits for, and sends 100
// Continue once its header asked for it.
func (st *connState) waiting() {
	switch {
	case st.rd.headerDone():
		if st.phase.Load() != phaseBody {
			st.setPhase(phaseBody)
		}
		if st.rd.expect100() && !st.continueSent {
			st.continueSent = true
			st.loopWrite([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
		}
	case st.rd.started() && st.phase.Load() == phaseIdle:
		st.setPhase(phaseHeader) // the header's time counts from its first byte
	}
}

// loopWrite writes b on the loop through gnet, for a connection no handler
// is writing to, and records what gnet kept (direct.go).
func (st *connState) loopWrite(b []byte) {
	q := &st.q
	q.mu.Lock()
	q.flushing = true
	q.mu.Unlock()
	_, _ = st.c.Write(b)
	out := st.c.OutboundBuffered()
	q.mu.Lock()
	st.outbound.Store(int64(out))
	q.flushing = false
	q.mu.Unlock()
}

// holdPipelined runs while a request is served: bytes the client sends
// ahead stay in gnet's buffer, and past the window the socket is no
// longer read, so the client's own TCP window fills. held tells the
// request's end to wake the loop for them (reuse); the end seen after
// held was set means that wake may not come, and the loop carries on
// itself (the caller's loop).
func (st *connState) holdPipelined() gnet.Action {
	c, win := st.c, st.srv.cfg.PipelineWindow
	buffered := c.InboundBuffered()
	if buffered > 16*win {
		st.srv.log.Warn("client pipelined past the window: disconnecting", "remote", st.remote, "buffered", buffered)
		return gnet.Close
	}
	if buffered > win {
		st.gate.pause(c)
	}
	if buffered > 0 {
		st.held.Store(true)
	}
	return gnet.None
}

// serve runs the handler, and makes sure its request ends exactly once:
// a panic is logged with its stack and answered 500 (or the connection
// dropped when part of the response has left), a handler that returned
// without finishing has its response aborted.
func (s *Server) serve(w *ResponseWriter, r *Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panic", "panic", fmt.Sprint(p), "path", r.Path, "remote", r.RemoteAddr, "stack", string(debug.Stack()))
			if !w.finished && !w.Started() {
				w.header, w.body = Header{}, nil
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(500)
				_, _ = w.Write([]byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}`))
				_ = w.Finish()
			}
		}
		if !w.finished {
			s.log.Warn("handler returned without finishing its response", "path", r.Path, "remote", r.RemoteAddr)
			w.Abort()
		}
	}()
	s.h.ServeHTTP(w, r)
}
