package httpx

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// rawResponse writes raw on a new connection to s and reads back the first
// response's bytes exactly: its head, then Content-Length bytes (none for
// HEAD).
func rawResponse(t *testing.T, s *Server, raw string, head bool) string {
	t.Helper()
	c := dialT(t, s)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var b strings.Builder
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the head: %v (%q so far)", err, b.String()+line)
		}
		b.WriteString(line)
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			for _, d := range strings.TrimSpace(v) {
				n = 10*n + int(d-'0')
			}
		}
		if line == "\r\n" {
			break
		}
	}
	if head {
		return b.String()
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("reading %d body bytes: %v", n, err)
	}
	return b.String() + string(body)
}

// TestFinishBodyIsWriteFinish: FinishBody sends the bytes Write then Finish
// send, for GET and HEAD, a status of its own, a body larger than the
// pooled messages, one after an earlier Write, and an empty one.
func TestFinishBodyIsWriteFinish(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 5000) // 80,000 bytes: past maxPooledMsg
	cases := []struct {
		name, pre, body string
		status          int
	}{
		{"small", "", `{"id":"cmpl-1","choices":[{"text":"hi"}]}`, 200},
		{"status", "", `{"error":{"message":"no"}}`, 429},
		{"empty", "", "", 204},
		{"after Write", "pre:", "post", 200},
		{"big", "", big, 200},
	}
	h := handlerFunc(func(w *ResponseWriter, r *Request) {
		c := cases[int(r.Path[1]-'a')]
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(c.pre))
		if r.Path[2] == 'b' { // FinishBody; 'w': Write and Finish
			_ = w.FinishBody(c.status, []byte(c.body))
			return
		}
		w.WriteHeader(c.status)
		_, _ = w.Write([]byte(c.body))
		_ = w.Finish()
	})
	s := serveT(t, DefaultConfig(), h)
	for i, c := range cases {
		for _, method := range []string{"GET", "HEAD"} {
			raw := func(how string) string {
				return method + " /" + string(rune('a'+i)) + how + " HTTP/1.1\r\nHost: a\r\n\r\n"
			}
			want := rawResponse(t, s, raw("w"), method == "HEAD")
			waitIdle(t, s)
			got := rawResponse(t, s, raw("b"), method == "HEAD")
			waitIdle(t, s)
			if got != want {
				t.Errorf("%s %s: FinishBody sent\n%.300q\nWrite+Finish sent\n%.300q", c.name, method, got, want)
			}
			if method == "GET" && !strings.HasSuffix(want, c.pre+c.body) {
				t.Errorf("%s: the response does not end with its body: %.300q", c.name, want)
			}
		}
	}
}
