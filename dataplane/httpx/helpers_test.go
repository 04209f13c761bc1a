package httpx

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// serveT runs a server with cfg on a free loopback port, one event loop,
// until the test ends.
func serveT(t *testing.T, cfg Config, h Handler) *Server {
	t.Helper()
	cfg.Addr, cfg.EventLoops = "127.0.0.1:0", 1
	s := NewServer(cfg, h)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	select {
	case <-s.Booted():
	case err := <-served:
		t.Fatalf("Serve returned before booting: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	})
	return s
}

// dialT connects to s, with a generous deadline on everything.
func dialT(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

// roundTrip writes raw on a new connection and reads one response to method.
func roundTrip(t *testing.T, s *Server, method, raw string) (*http.Response, string) {
	t.Helper()
	c := dialT(t, s)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// waitIdle waits until s serves no request: every request path ended its
// request exactly once.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Active() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight", s.Active())
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
}

// echo answers each request with its path and body.
var echo = handlerFunc(func(w *ResponseWriter, r *Request) {
	_, _ = w.Write([]byte(r.Path + ":" + string(r.Body)))
	_ = w.Finish()
})

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: a\r\n\r\n" }

func post(path, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: a\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// checkFor polls cond until it holds or within passes, in the manner of
// nats' checkFor.
func checkFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("condition not met within %v", within)
		}
	}
}
