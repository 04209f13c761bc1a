package passthrough

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/kvstore"
)

// ErrUnavailable: the engine could not be reached; nothing was sent to
// the client, which may be answered with an error.
var ErrUnavailable = errors.New("passthrough: engine unavailable")

// Serve routes the request to an HTTP engine and relays the engine's
// response to the client unchanged but for its hop-by-hop fields. Before anything reached the client it
// returns ErrNoEngine or ErrUnavailable (the caller answers); afterwards
// it returns the engine's status, and a failure mid-response closes the
// client connection. engine is the chosen engine's URL. keys (nil: none)
// are the prompt's block-hash extra keys, its images' for one, so that two
// prompts that differ in an image are not taken for one prefix.
func (p *Pool) Serve(ctx context.Context, w *httpx.ResponseWriter, r *httpx.Request, model string, tokens []uint32, keys *kvstore.Keys) (status int, engine string, err error) {
	e, release, err := p.pick(model, tokens, keys)
	if err != nil {
		return 0, "", err
	}
	defer release()
	c, err := net.DialTimeout("tcp", e.Host, 5*time.Second)
	if err != nil {
		e.healthy.Store(false) // the next poll decides when it is back
		return 0, e.URL, fmt.Errorf("%w: %s: %v", ErrUnavailable, e.URL, err)
	}
	up := c.(*net.TCPConn)
	defer up.Close()
	client, err := w.Hijack(ctx)
	if err != nil {
		w.Unhijack(nil, false)
		return 0, e.URL, err
	}
	status, keepAlive, err := p.relay(ctx, up, client, r.Raw())
	// The response is over: release its load before the connection can
	// serve the client's next request, which a sequential client sends as
	// soon as it has this response. Still counted, this request's prefill
	// would weigh against the engine that now holds its prefix.
	release()
	w.Unhijack(client, keepAlive && err == nil)
	if err != nil {
		e.cut[cutReason(err)].Add(1)
		p.log.Warn("passthrough response cut short", "engine", e.URL, "err", err)
		// Reset rather than close: with the response abandoned the engine
		// may still be writing, and a closed socket with unread data sits
		// in FIN-WAIT-2 with a zero window, holding the engine's write for
		// tcp_fin_timeout (about 60 s, seen under sockmap after a client
		// reset).
		_ = up.SetLinger(0)
	}
	return status, e.URL, err
}

// relay forwards the request and steers the response. keepAlive says the
// response was self-delimited (Content-Length or chunked), so the client
// connection can serve its next request.
func (p *Pool) relay(ctx context.Context, up, client *net.TCPConn, raw []byte) (status int, keepAlive bool, err error) {
	pair, err := p.Steer.Prepare(up, client)
	if err != nil {
		return 0, false, err
	}
	defer pair.Release()
	if _, err := up.Write(connectionClose(raw)); err != nil {
		return 0, false, fmt.Errorf("forwarding the request: %w", err)
	}
	_ = up.SetReadDeadline(time.Now().Add(10 * time.Minute)) // the header: bounded by the first-token wait
	head, end, err := readHead(pair.Read)
	if err != nil {
		return 0, false, err
	}
	_ = up.SetReadDeadline(time.Time{})
	status, length, chunked := parseHead(head[:end])
	delimited := chunked || length >= 0
	out := append(hopByHop(head[:end], !delimited), head[end:]...)
	if _, err := client.Write(out); err != nil {
		return status, false, err
	}
	total := int64(-1) // chunked or close-delimited: until the engine closes (we asked it to)
	if length >= 0 && !chunked {
		total = int64(end) + length
		if int64(len(head)) >= total {
			return status, true, nil
		}
	}
	if _, err := pair.Steer(ctx, int64(len(head)), total); err != nil {
		return status, false, err
	}
	return status, delimited, nil
}

// hopByHop drops the engine's Connection and Keep-Alive fields from a
// response header: they describe the engine's connection (which kvgate
// asked to close), not the client's (RFC 9110 section 7.6.1). A response
// that only the engine's close delimits gets "Connection: close".
func hopByHop(head []byte, closeDelimited bool) []byte {
	lines := bytes.Split(head[:len(head)-4], []byte("\r\n"))
	out := make([]byte, 0, len(head)+19)
	for i, l := range lines {
		name, _, _ := bytes.Cut(l, []byte(":"))
		if i > 0 && (bytes.EqualFold(name, []byte("connection")) || bytes.EqualFold(name, []byte("keep-alive"))) {
			continue
		}
		out = append(append(out, l...), "\r\n"...)
	}
	if closeDelimited {
		out = append(out, "Connection: close\r\n"...)
	}
	return append(out, "\r\n"...)
}

// connectionClose rewrites a request's Connection header to "close", so
// the engine ends every response by closing: the end of a chunked stream
// is then its EOF, which the steering modes detect without parsing chunks.
func connectionClose(raw []byte) []byte {
	end := bytes.Index(raw, []byte("\r\n\r\n"))
	if end < 0 {
		return raw
	}
	out := make([]byte, 0, len(raw)+19)
	lines := bytes.Split(raw[:end], []byte("\r\n"))
	for i, l := range lines {
		if i > 0 && len(l) > 11 && bytes.EqualFold(l[:11], []byte("connection:")) {
			continue
		}
		out = append(append(out, l...), "\r\n"...)
	}
	out = append(out, "Connection: close\r\n\r\n"...)
	return append(out, raw[end+4:]...)
}
