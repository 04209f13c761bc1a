package httpx

import (
	"errors"
	"net/http"

	"github.com/panjf2000/gnet/v2"
	"strconv"
	"time"
)

// ResponseWriter writes one response, whole (Write then Finish) or streamed
// (Stream, Chunk..., Finish). Bytes leave through gnet's AsyncWrite from the
// handler's goroutine; bytes not yet on the wire are counted, and a client
// that lets more than MaxPendingWrite pile up is disconnected.
type ResponseWriter struct {
	st        *connState
	req       *Request
	header    Header
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
	return w.send(w.head(-1))
}

// Chunk sends one chunk of a streamed response.
func (w *ResponseWriter) Chunk(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	b := make([]byte, 0, len(p)+16)
	b = strconv.AppendInt(b, int64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	b = append(b, "\r\n"...)
	return w.send(b)
}

// Finish completes the response and lets the connection serve its next request.
func (w *ResponseWriter) Finish() error {
	if w.finished {
		return nil
	}
	w.finished = true
	defer w.st.srv.active.Add(-1)
	var err error
	if w.streaming {
		err = w.send([]byte("0\r\n\r\n"))
	} else {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		msg := w.head(len(w.body))
		err = w.send(append(msg, w.body...))
	}
	st := w.st
	if err != nil || w.req.close || st.srv.closing.Load() {
		_ = st.c.CloseWithCallback(nil)
		return err
	}
	st.since.Store(time.Now().UnixNano())
	st.busy.Store(false)
	return st.c.Wake(nil) // parse any pipelined request already buffered
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

func (w *ResponseWriter) head(contentLength int) []byte {
	b := make([]byte, 0, 256)
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, statusText(w.status)...)
	b = append(b, "\r\n"...)
	for _, f := range w.header {
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

func (w *ResponseWriter) send(b []byte) error {
	st := w.st
	if st.closed.Load() {
		return ErrClientGone
	}
	if st.pending.Add(int64(len(b)))+st.outbound.Load() > int64(st.srv.cfg.MaxPendingWrite) {
		// The client stopped reading: cut it off rather than buffer forever.
		st.srv.log.Warn("client not reading: disconnecting", "remote", st.remote, "pending", st.pending.Load())
		_ = st.c.CloseWithCallback(nil)
		return ErrClientGone
	}
	n := int64(len(b))
	return st.c.AsyncWrite(b, func(c gnet.Conn, _ error) error {
		// On the event loop: the one place OutboundBuffered may be read.
		st.outbound.Store(int64(c.OutboundBuffered()))
		st.pending.Add(-n)
		return nil
	})
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}
