package httpx

import (
	"strconv"
	"testing"
)

// TestReaderRequestAllocs holds parsing proxybench's request (one read,
// three header fields and a body) to 3 allocations: the head's one
// string, the request (its first header fields and its response's writer
// inside), and the body.
func TestReaderRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	body := `{"model":"Qwen/Qwen3-8B","prompt":"Hello","max_tokens":1}`
	in := []byte("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	p := reader{lim: limits{maxHeader: 64 << 10, maxBody: 32 << 20}}
	n := testing.AllocsPerRun(200, func() {
		if _, r, err := p.feed(in); err != nil || r == nil || string(r.Body) != body || r.Header.Get("content-length") == "" {
			t.Fatal(err, r)
		}
	})
	if n > 3 {
		t.Fatalf("%v allocations parsing a request, want at most 3", n)
	}
}

// TestManyHeaderFields: a request with more fields than it holds inline
// keeps every one of them, in order.
func TestManyHeaderFields(t *testing.T) {
	head := "GET / HTTP/1.1\r\nHost: a"
	for i := range headFields + 3 {
		head += "\r\nX-F" + strconv.Itoa(i) + ": v" + strconv.Itoa(i)
	}
	p := reader{lim: limits{maxHeader: 64 << 10, maxBody: 1 << 20}}
	_, r, err := p.feed([]byte(head + "\r\n\r\n"))
	if err != nil || r == nil {
		t.Fatal(err, r)
	}
	if len(r.Header) != headFields+4 {
		t.Fatalf("%d fields, want %d", len(r.Header), headFields+4)
	}
	for i := range headFields + 3 {
		if f := r.Header[i+1]; f.Name != "X-F"+strconv.Itoa(i) || f.Value != "v"+strconv.Itoa(i) {
			t.Fatalf("field %d is %+v", i+1, f)
		}
	}
}
