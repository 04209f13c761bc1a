package httpx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// handlerFunc adapts a function to Handler.
type handlerFunc func(w *ResponseWriter, r *Request)

func (f handlerFunc) ServeHTTP(w *ResponseWriter, r *Request) { f(w, r) }

// TestServeAndShutdown: a server on a free port answers a request, and
// Shutdown stops it: Serve returns, and its event loops and the handler's
// goroutine are gone (TestMain's leak check).
func TestServeAndShutdown(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.EventLoops = "127.0.0.1:0", 2
	s := NewServer(cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		_, _ = fmt.Fprintf(w, "hello %s", r.Path)
		_ = w.Finish()
	}))
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	select {
	case <-s.Booted():
	case err := <-served:
		t.Fatalf("Serve returned before booting: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not boot")
	}

	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(body) != "hello /x" {
		t.Fatalf("%d %q (%v)", resp.StatusCode, body, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
}

// TestPartialHeaderTimesOut: a client that sends half a header is
// answered 408 and cut off after HeaderTimeout, even though the idle
// timeout is far away; OnTick learns that from the loop's own record, not
// from gnet's buffer (which only the loop may read).
func TestPartialHeaderTimesOut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HeaderTimeout, cfg.IdleTimeout = time.Second, time.Hour
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) { _ = w.Finish() }))
	c := dialT(t, s)
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost:"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 408 {
		t.Fatalf("want 408, got %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if n, err := br.Read(make([]byte, 1)); err != io.EOF || n != 0 {
		t.Fatalf("want the server to close the connection, got %d bytes, %v", n, err)
	}
}
