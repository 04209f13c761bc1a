package httpx

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Hijack hands the client's socket to the caller for this response (to
// relay an engine's answer with splice or in-kernel steering). It waits
// until everything written earlier on the connection has left gnet's
// buffers, then returns a connection on a duplicate of the socket: bytes
// written to it go to the client right away. gnet keeps reading the
// client (a pipelined request waits in its buffer) and writes nothing
// until Unhijack.
func (w *ResponseWriter) Hijack(ctx context.Context) (*net.TCPConn, error) {
	st := w.st
	for {
		if st.closed.Load() {
			return nil, ErrClientGone
		}
		if st.pending.Load() == 0 && w.outboundNow(ctx) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(200 * time.Microsecond)
	}
	fd, err := st.c.Dup()
	if err != nil {
		return nil, fmt.Errorf("httpx: duplicating the client socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "client")
	defer f.Close() // FileConn dups again
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("httpx: client socket: %w", err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("httpx: client socket is not TCP")
	}
	return tc, nil
}

// outboundNow asks the event loop how many bytes gnet still holds for
// the client (-1 when it cannot tell), and records it in outbound.
func (w *ResponseWriter) outboundNow(ctx context.Context) int {
	ch := make(chan int, 1)
	st := w.st
	err := st.c.Wake(func(c gnet.Conn, _ error) error {
		n := c.OutboundBuffered()
		st.q.mu.Lock() // outbound is stored on the loop only (direct.go)
		st.outbound.Store(int64(n))
		st.q.mu.Unlock()
		ch <- n
		return nil
	})
	if err != nil {
		return -1
	}
	select {
	case n := <-ch:
		return n
	case <-ctx.Done():
		return -1
	}
}

// Unhijack ends a hijack and the response: c is closed (the socket stays
// open for gnet); with keepAlive the connection serves its next request,
// otherwise it closes.
func (w *ResponseWriter) Unhijack(c *net.TCPConn, keepAlive bool) {
	if c != nil {
		_ = c.Close()
	}
	if w.finished {
		return
	}
	w.finished = true
	st := w.st
	st.srv.active.Add(-1)
	if !keepAlive || w.req.close || st.srv.closing.Load() {
		_ = st.c.CloseWithCallback(nil)
		return
	}
	st.reuse()
}

// Raw returns the request's bytes exactly as the client sent them (header
// and body), when the server keeps them (Config.KeepRaw).
func (r *Request) Raw() []byte { return r.raw }
