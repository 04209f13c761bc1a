package passthrough

import (
	"strings"
	"testing"
)

func TestConnectionClose(t *testing.T) {
	in := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nconnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
	got := string(connectionClose([]byte(in)))
	want := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
	if got != want {
		t.Fatalf("got %q", got)
	}
}

func TestResponseHead(t *testing.T) {
	head := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nKeep-Alive: timeout=5\r\n\r\n")
	status, length, chunked := parseHead(head)
	if status != 200 || length != -1 || !chunked {
		t.Fatalf("status %d length %d chunked %v", status, length, chunked)
	}
	if got := string(hopByHop(head, false)); strings.Contains(got, "onnection") || strings.Contains(got, "Keep-Alive") ||
		!strings.HasSuffix(got, "chunked\r\n\r\n") {
		t.Fatalf("hop-by-hop fields left: %q", got)
	}
	if got := string(hopByHop([]byte("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"), true)); got != "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n" {
		t.Fatalf("close-delimited: %q", got)
	}
	if _, length, _ := parseHead([]byte("HTTP/1.1 404 Not Found\r\ncontent-length: 17\r\n\r\n")); length != 17 {
		t.Fatalf("length %d", length)
	}
}
