//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientResetFreesEngine: a client that resets its connection in the
// middle of a large sockmap-steered response costs the engine nothing
// lasting: its write fails within seconds, where a closed upstream socket
// left in FIN-WAIT-2 with a zero window held it for tcp_fin_timeout
// (about 60 s) before the relay reset it.
func TestClientResetFreesEngine(t *testing.T) {
	requireSockmap(t)
	writeDone := make(chan time.Time, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go fakeBulkEngine(ln, writeDone)
	_, base := startKvgate(t, "--http-engine", "http://"+ln.Addr().String(), "--steering", "sockmap")
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := http.Get(base + "/ready")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("ready: %d", r.StatusCode)
		}
		return nil
	})
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"model":%q,"prompt":"bulk","max_tokens":1}`, model)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := bufio.NewReaderSize(c, 128<<10).Peek(64 << 10); err != nil { // the body is flowing
		t.Fatal(err)
	}
	// Stop reading long enough for every buffer on the way to fill, then
	// reset.
	time.Sleep(2 * time.Second) // a client that stops reading, not synchronisation
	_ = c.(*net.TCPConn).SetLinger(0)
	reset := time.Now()
	c.Close()
	select {
	case done := <-writeDone:
		if held := done.Sub(reset); held > 20*time.Second {
			t.Fatalf("the engine's write was held %v after the client reset", held)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the engine's write was still held 45 s after the client reset")
	}
}

// fakeBulkEngine answers /v1/models, and a completion with a 1 GiB body it
// writes until the write fails, then reports when on done.
func fakeBulkEngine(ln net.Listener, done chan<- time.Time) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			req, err := http.ReadRequest(r)
			if err != nil {
				return
			}
			if req.URL.Path == "/v1/models" {
				b := fmt.Sprintf(`{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(b), b)
				return
			}
			const size = 1 << 30
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = 'a'
			}
			for n := 0; n < size; n += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					break
				}
			}
			select {
			case done <- time.Now():
			default:
			}
		}()
	}
}
