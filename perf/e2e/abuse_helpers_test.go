//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssOf returns a process's resident set size in bytes (Linux).
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// rssPeak samples a process's RSS until stop is called, which returns the
// highest value seen.
func rssPeak(t *testing.T, pid int) (stop func() int64) {
	t.Helper()
	var peak atomic.Int64
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n, err := rssOf(pid); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond): // the sampling interval
			}
		}
	}()
	var once sync.Once
	return func() int64 {
		once.Do(func() { close(quit); <-done })
		return peak.Load()
	}
}

// hostile is a raw connection to kvgate, for what well-behaved clients
// never send.
type hostile struct {
	c  net.Conn
	br *bufio.Reader
}

func dialHostile(t *testing.T, base string) *hostile {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(90 * time.Second))
	return &hostile{c: c, br: bufio.NewReader(c)}
}

// send writes raw; a write error is the server having closed the
// connection already, which the next read reports.
func (h *hostile) send(raw string) { _, _ = io.WriteString(h.c, raw) }

// response reads the next response (its body too) to a request of method.
func (h *hostile) response(t *testing.T, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(h.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// expectStatus reads the next response and checks its status and, for an
// error, that its body is in an API's error shape.
func (h *hostile) expectStatus(t *testing.T, method string, status int) string {
	t.Helper()
	resp, body := h.response(t, method)
	if resp.StatusCode != status {
		t.Fatalf("got %d, want %d: %.200s", resp.StatusCode, status, body)
	}
	if status >= 400 && !strings.Contains(body, `"error"`) {
		t.Fatalf("a %d not in an API's error shape: %.200s", status, body)
	}
	return body
}

// jsonPost is a raw POST of a JSON body with the API key.
func jsonPost(path, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: bearer k1\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// tokenIDs is a JSON list of n valid token ids.
func tokenIDs(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("100,", n), ",") + "]"
}
