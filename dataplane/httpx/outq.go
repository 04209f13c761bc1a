package httpx

import (
	"context"
	"strconv"
	"sync"

	"github.com/panjf2000/gnet/v2"
)

// A streamed response leaves through its connection's write queue, not one
// AsyncWrite per chunk: the handler appends each chunk to the queue's
// buffer, and the connection's event loop writes whatever has piled up in
// one write(2). Connections with bytes waiting are on their loop's
// flusher list; the one that finds the list empty wakes the loop (one
// Execute, one eventfd write at most), and the loop drains every listed
// connection in that one task. A loop that is behind thus takes many
// chunks of a connection, and many connections, per wake-up; one that
// keeps up writes each chunk as soon as it comes, as before. The client
// gets the same bytes in the same order.
//
// Queued bytes count against MaxPendingWrite from the moment they are
// queued until the loop hands them to gnet, as AsyncWrite's did; the end
// of the response (the connection's next request, or its close) runs on
// the loop after the last bytes are written, so nothing of the next
// response, nor gnet's close, can overtake them.
//
// The stream's head, its last chunk and its end skip the queue when
// nothing is on its way (direct.go): the handler writes them itself and
// ends the response at once. Chunks always take the queue: with
// thousands of streams the loop's one write per connection per wake-up
// costs less than a write(2) per chunk from each handler (perf/RESULTS.md).

// writeQueue is a connection's streamed bytes on their way to its loop,
// and the connection's write lock (direct.go). mu guards all of it but
// out; the loop holds it only to swap buffers or record what it wrote.
type writeQueue struct {
	mu       sync.Mutex
	buf      []byte // queued, not yet given to gnet
	listed   bool   // on the flusher's list
	flushing bool   // the loop is handing the last swapped buffer to gnet
	async    int    // AsyncWrites of this connection not yet run by the loop
	end      func() // after buf is written: the response's end (flushEnd)
	// out is the buffer the loop writes, which becomes buf again at the
	// next swap (gnet keeps what the socket did not take in its own
	// buffer); swapped under mu, read by the loop while flushing.
	out []byte
}

// flusher is an event loop's list of connections with queued bytes.
type flusher struct {
	loop  gnet.EventLoop
	mu    sync.Mutex
	list  []*connState
	woken bool         // an Execute is on its way: later additions ride on it
	work  []*connState // the loop's own: the list being drained
}

// flusherOf returns the flusher of loop, made on first use.
func (s *Server) flusherOf(loop gnet.EventLoop) *flusher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flushers == nil {
		s.flushers = make(map[gnet.EventLoop]*flusher)
	}
	f := s.flushers[loop]
	if f == nil {
		f = &flusher{loop: loop}
		s.flushers[loop] = f
	}
	return f
}

// add lists st, waking the loop if nothing else had.
func (f *flusher) add(st *connState) {
	f.mu.Lock()
	f.list = append(f.list, st)
	wake := !f.woken
	f.woken = true
	f.mu.Unlock()
	if wake && f.loop.Execute(context.Background(), f) != nil {
		f.mu.Lock() // the engine is stopping: the next addition tries again
		f.woken = false
		f.mu.Unlock()
	}
}

// Run implements gnet.Runnable: on the loop, it writes out every listed
// connection's queue.
func (f *flusher) Run(context.Context) error {
	f.mu.Lock()
	f.work, f.list = f.list, f.work[:0]
	f.woken = false
	f.mu.Unlock()
	for i, st := range f.work {
		st.flush()
		f.work[i] = nil
	}
	return nil
}

// flush writes st's queued bytes, on its loop, then runs the response's
// end if it was queued behind them.
func (st *connState) flush() {
	q := &st.q
	q.mu.Lock()
	b, end := q.buf, q.end
	q.buf, q.out, q.end, q.listed = q.out[:0], b, nil, false
	if end != nil {
		q.buf, q.out = nil, nil // the response is over: idle connections keep no buffers
	}
	q.flushing = true
	q.mu.Unlock()
	if len(b) > 0 && !st.closed.Load() { // closed is set on this loop: a closed conn is never written
		_, _ = st.c.Write(b) // what the socket does not take now, gnet keeps in order
	}
	out := st.c.OutboundBuffered()
	q.mu.Lock()
	st.outbound.Store(int64(out))
	q.flushing = false
	q.mu.Unlock()
	st.pending.Add(-int64(len(b)))
	if end != nil {
		end()
	}
}

// queue appends b to the connection's write queue; when asChunk, as one
// chunk of the chunked encoding (size line, b, CRLF). Bytes that are not
// a chunk, when nothing else is on its way, the handler writes to the
// socket itself (direct.go), queueing only what the socket did not take.
// A client with more than MaxPendingWrite waiting for it is not reading,
// and is cut off.
func (w *ResponseWriter) queue(b []byte, asChunk bool) error {
	st := w.st
	n := len(b)
	if asChunk {
		n += chunkOverhead(len(b))
	}
	if err := w.admit(n); err != nil {
		return err
	}
	if hook := beforeWriteLock.Load(); hook != nil {
		(*hook)()
	}
	q := &st.q
	q.mu.Lock()
	direct := !asChunk && st.direct()
	if asChunk {
		q.buf = strconv.AppendInt(q.buf, int64(len(b)), 16)
		q.buf = append(q.buf, "\r\n"...)
		q.buf = append(q.buf, b...)
		q.buf = append(q.buf, "\r\n"...)
	} else {
		q.buf = append(q.buf, b...)
	}
	if direct {
		sent, err := st.writeSocket(q.buf)
		if err != nil {
			q.buf = q.buf[:0]
			q.mu.Unlock()
			st.pending.Add(-int64(n))
			_ = st.c.CloseWithCallback(nil)
			return err
		}
		q.buf = q.buf[:copy(q.buf, q.buf[sent:])]
		st.pending.Add(-int64(sent))
		if len(q.buf) == 0 {
			q.mu.Unlock()
			return nil
		}
	}
	list := !q.listed
	q.listed = true
	q.mu.Unlock()
	if list {
		st.fl.add(st)
	}
	return nil
}

// flushEnd runs end once everything queued before it is written: at once
// when nothing is on its way, otherwise on the loop, which then drops the
// connection's buffers.
func (w *ResponseWriter) flushEnd(end func()) {
	st := w.st
	q := &st.q
	q.mu.Lock()
	if st.direct() {
		q.buf, q.out = nil, nil // the response is over: idle connections keep no buffers
		q.mu.Unlock()
		end()
		return
	}
	q.end = end
	list := !q.listed
	q.listed = true
	q.mu.Unlock()
	if list {
		st.fl.add(st)
	}
}

// admit counts n more bytes for the client, or cuts off one that lets
// more than MaxPendingWrite pile up.
func (w *ResponseWriter) admit(n int) error {
	st := w.st
	if st.closed.Load() {
		return ErrClientGone
	}
	if st.pending.Add(int64(n))+st.outbound.Load() > int64(st.srv.cfg.MaxPendingWrite) {
		st.pending.Add(-int64(n))
		st.srv.log.Warn("client not reading: disconnecting", "remote", st.remote, "pending", st.pending.Load(),
			"outbound", st.outbound.Load(), "limit", st.srv.cfg.MaxPendingWrite)
		_ = st.c.CloseWithCallback(nil)
		return ErrClientGone
	}
	return nil
}

// chunkOverhead is what the chunked encoding adds to n bytes of data.
func chunkOverhead(n int) int {
	digits := 1
	for n >= 16 {
		n >>= 4
		digits++
	}
	return digits + 4
}
