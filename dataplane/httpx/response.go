package httpx

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// ResponseWriter writes one response, whole (Write then Finish) or streamed
// (Stream, Chunk..., Finish). Its bytes go straight to the socket from the
// handler's goroutine while nothing else of the connection is on its way
// (direct.go); otherwise a whole response leaves through gnet's AsyncWrite,
// a streamed one through the connection's write queue (outq.go). Bytes
// not yet on the wire are counted. A streamed response to a client that lets more than
// MaxPendingWrite pile up is cut off; a whole response is written as fast
// as the client reads it.
type ResponseWriter struct {
	st        *connState
	req       *Request
	header    Header
	fields    [4]Field // header's first fields, in the writer's own allocation
	status    int
	body      []byte
	streaming bool
	finished  bool
}

// ErrClientGone is returned by writes after the client disconnected or was
// cut off for not reading.
var ErrClientGone = errors.New("httpx: client gone")

// Header returns the response header to fill before the first write.
func (w *ResponseWriter) Header() *Header { return &w.header }

// Set adds a header field.
func (h *Header) Set(name, value string) { *h = append(*h, Field{name, value}) }

// Gone is closed when the client's connection closes.
func (w *ResponseWriter) Gone() <-chan struct{} { return w.st.gone }

// Started reports whether the response's head has been sent (a stream
// began), so an error can no longer be a response of its own.
func (w *ResponseWriter) Started() bool { return w.streaming }

// Finished reports whether Finish, Abort or Unhijack ended the response.
func (w *ResponseWriter) Finished() bool { return w.finished }

// WriteHeader sets the status of a whole response.
func (w *ResponseWriter) WriteHeader(status int) { w.status = status }

// Write appends to a whole response's body.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

// Stream sends the status and header of a streamed (chunked) response.
func (w *ResponseWriter) Stream(status int) error {
	w.streaming, w.status = true, status
	w.header.Set("Transfer-Encoding", "chunked")
	return w.queue(w.head(-1, 0), false)
}

// Chunk sends one chunk of a streamed response. p is copied: the caller
// may reuse it at once.
func (w *ResponseWriter) Chunk(p []byte) error {
	if len(p) == 0 || w.req.Method == "HEAD" {
		return nil
	}
	if len(p)+chunkOverhead(len(p)) > w.st.srv.cfg.MaxPendingWrite/2 {
		return w.chunkPaced(p)
	}
	return w.queue(p, true)
}

// chunkPaced queues a chunk too large to pile up at once, in pieces each
// queued once the client has read enough of what came before.
func (w *ResponseWriter) chunkPaced(p []byte) error {
	size := strconv.AppendInt(make([]byte, 0, 20), int64(len(p)), 16)
	if err := w.queue(append(size, "\r\n"...), false); err != nil {
		return err
	}
	piece := max(w.st.srv.cfg.MaxPendingWrite/2, 1)
	for len(p) > 0 {
		b := p[:min(piece, len(p))]
		if err := w.waitRoom(int64(len(b))); err != nil {
			return err
		}
		if err := w.queue(b, false); err != nil {
			return err
		}
		p = p[len(b):]
	}
	return w.queue([]byte("\r\n"), false)
}

// Finish completes the response and lets the connection serve its next request.
func (w *ResponseWriter) Finish() error {
	if w.finished || w.streaming {
		return w.end()
	}
	body := w.body
	w.body = nil
	return w.finishWhole(body)
}

// FinishBody completes a whole response with body as all of its content
// (after anything Write appended), in one copy: body is written straight
// after the head into the message that goes to the connection, and may be
// reused once FinishBody returns. A streamed response only ends, as Finish.
func (w *ResponseWriter) FinishBody(status int, body []byte) error {
	if w.finished || w.streaming {
		return w.end()
	}
	w.status = status
	if len(w.body) > 0 {
		body = append(w.body, body...)
	}
	w.body = nil
	return w.finishWhole(body)
}

// end is Finish for a response that is over or streamed.
func (w *ResponseWriter) end() error {
	if w.finished {
		return nil
	}
	w.finished = true
	return w.finishStream()
}

// msgBufs holds the messages whole responses are written into; one goes
// back once the loop has written it (gnet copies what the socket did not
// take).
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledMsg is the largest message kept in msgBufs.
const maxPooledMsg = 64 << 10

// finishWhole sends a whole response: its head, then body.
func (w *ResponseWriter) finishWhole(body []byte) error {
	w.finished = true
	defer w.st.srv.active.Add(-1)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	size := headRoom + len(body)
	var msg []byte
	var pooled *[]byte
	if size <= maxPooledMsg {
		pooled = msgBufs.Get().(*[]byte)
		msg = (*pooled)[:0]
	} else {
		msg = make([]byte, 0, size)
	}
	msg = w.appendHead(msg, len(body))
	if w.req.Method != "HEAD" { // RFC 9110 9.3.2: the head a GET would get, no content
		msg = append(msg, body...)
	}
	var err error
	if pooled != nil && len(msg) <= max(w.st.srv.cfg.MaxPendingWrite/2, 1) {
		*pooled = msg
		err = w.sendOne(msg, pooled)
	} else {
		err = w.sendPaced(msg)
	}
	st := w.st
	if err != nil || w.req.close || st.srv.closing.Load() {
		_ = st.c.CloseWithCallback(nil)
		return err
	}
	st.reuse()
	return nil
}

// lastChunk ends a chunked body (no trailers).
var lastChunk = []byte("0\r\n\r\n")

// finishStream queues a streamed response's last chunk, and its end behind
// it: on the loop, once everything before it is written, the connection
// serves its next request or closes.
func (w *ResponseWriter) finishStream() error {
	var err error
	if w.req.Method != "HEAD" {
		err = w.queue(lastChunk, false)
	}
	st, keep := w.st, err == nil && !w.req.close
	w.flushEnd(func() {
		st.srv.active.Add(-1)
		if !keep || st.srv.closing.Load() {
			_ = st.c.CloseWithCallback(nil)
			return
		}
		st.reuse()
	})
	return err
}

// reuse readies the connection for its next request, and wakes the loop
// when one is already buffered (held, conn.go): otherwise the loop
// parses the next one when its bytes arrive.
func (st *connState) reuse() {
	st.setPhase(phaseIdle)
	st.busy.Store(false)
	if st.held.Swap(false) {
		_ = st.c.Wake(nil) // on the loop: reading resumes, the pipelined request is parsed
	}
}

// Abort drops the connection without completing the response.
func (w *ResponseWriter) Abort() {
	if w.finished {
		return
	}
	w.finished = true
	w.st.srv.active.Add(-1)
	_ = w.st.c.CloseWithCallback(nil)
}

// headRoom is what a head usually takes: the room a message has for it.
const headRoom = 256

// head is a streamed response's head, in a buffer of its own.
func (w *ResponseWriter) head(contentLength, room int) []byte {
	return w.appendHead(make([]byte, 0, headRoom+room), contentLength)
}

// appendHead appends the response's head to b; a negative contentLength
// leaves Content-Length out.
func (w *ResponseWriter) appendHead(b []byte, contentLength int) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, statusText(w.status)...)
	b = append(b, "\r\n"...)
	for _, f := range w.header {
		if !isToken(f.Name) || !safeValue(f.Value) {
			w.st.srv.log.Warn("dropping a response header that would break the head", "name", strconv.Quote(f.Name))
			continue
		}
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	if contentLength >= 0 {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(contentLength), 10)
		b = append(b, "\r\n"...)
	}
	if w.req.close || w.st.srv.closing.Load() {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...)
}

// safeValue reports whether v can be a field value as it is: no CR, LF
// or other control characters but tab.
func safeValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// send queues b for the client; a client with more than MaxPendingWrite
// waiting for it is not reading, and is cut off.
func (w *ResponseWriter) send(b []byte) error { return w.sendOne(b, nil) }

// sendOne is send, putting release back in msgBufs once b is written.
func (w *ResponseWriter) sendOne(b []byte, release *[]byte) error {
	if err := w.admit(len(b)); err != nil {
		return err
	}
	return w.st.writeWhole(b, release)
}

// asyncWrite hands b, an AsyncWrite counted in q.async, to the loop.
func (st *connState) asyncWrite(b []byte, release *[]byte) error {
	n := int64(len(b))
	err := st.c.AsyncWrite(b, func(c gnet.Conn, _ error) error {
		// On the event loop: the one place OutboundBuffered may be read.
		st.q.mu.Lock()
		st.outbound.Store(int64(c.OutboundBuffered()))
		st.q.async--
		st.q.mu.Unlock()
		st.pending.Add(-n)
		putMsg(release)
		return nil
	})
	if err != nil { // the engine is stopping: no callback comes
		st.q.mu.Lock()
		st.q.async--
		st.q.mu.Unlock()
		st.pending.Add(-n)
	}
	return err
}

// sendPaced queues b in pieces of at most half of MaxPendingWrite, each
// once the client has read enough of what came before: a response of any
// size leaves with backpressure. Only a client that reads nothing for
// WriteStallTimeout is cut off.
func (w *ResponseWriter) sendPaced(b []byte) error {
	st := w.st
	piece := max(st.srv.cfg.MaxPendingWrite/2, 1)
	for len(b) > 0 {
		p := b[:min(piece, len(b))]
		if err := w.waitRoom(int64(len(p))); err != nil {
			return err
		}
		if err := w.send(p); err != nil {
			return err
		}
		b = b[len(p):]
	}
	return nil
}

// waitRoom waits until n more bytes fit under MaxPendingWrite, asking the
// loop how much gnet still holds; it gives up when nothing left for
// WriteStallTimeout.
func (w *ResponseWriter) waitRoom(n int64) error {
	st, limit := w.st, int64(w.st.srv.cfg.MaxPendingWrite)
	held := st.pending.Load() + st.outbound.Load()
	if held+n <= limit {
		return nil
	}
	last, lastMove, delay := held, time.Now(), 100*time.Microsecond
	for {
		if st.closed.Load() {
			return ErrClientGone
		}
		ctx, cancel := context.WithTimeout(context.Background(), st.srv.cfg.WriteStallTimeout)
		out := w.outboundNow(ctx)
		cancel()
		if out < 0 {
			return ErrClientGone
		}
		held = st.pending.Load() + int64(out)
		if held+n <= limit {
			return nil
		}
		if held < last {
			last, lastMove, delay = held, time.Now(), 100*time.Microsecond
		} else if stalled := time.Since(lastMove); stalled > st.srv.cfg.WriteStallTimeout {
			st.srv.log.Warn("client not reading: disconnecting", "remote", st.remote, "held", held,
				"stalled", stalled.Round(time.Millisecond).String())
			_ = st.c.CloseWithCallback(nil)
			return ErrClientGone
		}
		time.Sleep(delay) // the poll interval: gnet tells no one when a write drains
		delay = min(2*delay, 10*time.Millisecond)
	}
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}
