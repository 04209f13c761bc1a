package floor

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRequestLen(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		bad  bool
	}{
		{"POST / HTTP/1.1\r\nHost: x\r\n", 0, false},
		{"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{", 0, false},
		{"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}", 40, false},
		{"GET / HTTP/1.1\r\n\r\n", 18, false},
		{"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 0, true},
		{"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 0, true},
	} {
		n, err := requestLen([]byte(c.in))
		if n != c.want || (err != nil) != c.bad {
			t.Errorf("requestLen(%q) = %d, %v; want %d, bad %v", c.in, n, err, c.want, c.bad)
		}
	}
}

// start runs a floor proxy in mode on a free port and returns its address.
func start(t *testing.T, mode Mode) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p, err := New(Config{Addr: addr, Mode: mode, Loops: 2, Body: []byte(`{"ok":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	p.Handle(4)
	errc := make(chan error, 1)
	go func() { errc <- p.Serve() }()
	select {
	case <-p.Booted():
	case err := <-errc:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.eng.Stop(ctx)
		p.Close()
	})
	return addr
}

func TestAnswersEveryRequest(t *testing.T) {
	for _, mode := range []Mode{ModeLoop, ModeWorker} {
		t.Run(string(mode), func(t *testing.T) {
			addr := start(t, mode)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for i := range 100 {
				if _, err := io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || string(body) != `{"ok":true}` {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
				}
			}
		})
	}
}

func TestRefusesPipeliningAndBadRequests(t *testing.T) {
	addr := start(t, ModeLoop)
	for _, in := range []string{
		strings.Repeat("GET / HTTP/1.1\r\n\r\n", 2),
		"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, in)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Errorf("%q: read %q, %v; want the connection closed unanswered", in, b, err)
		}
		c.Close()
	}
	if _, err := New(Config{Mode: "nope"}); err == nil {
		t.Error("New took an unknown mode")
	}
}
