package httpx

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkReaderByteAtATime: a 2.5 MB body arriving one byte per read,
// the case that cost 11 s of CPU and 2.4 GB when every read re-parsed
// the whole buffer.
func BenchmarkReaderByteAtATime(b *testing.B) {
	in := []byte(post("/x", strings.Repeat("x", 5<<19)))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		p := reader{lim: limits{maxHeader: 64 << 10, maxBody: 32 << 20}}
		var req *Request
		for i := range in {
			if _, r, err := p.feed(in[i : i+1]); err != nil {
				b.Fatal(err)
			} else if r != nil {
				req = r
			}
		}
		if req == nil {
			b.Fatal("no request")
		}
	}
}

// BenchmarkReaderRequest: the request wrk sends in perf/scripts/proxybench.sh
// (three header fields, a 120-byte body), parsed whole from one read.
func BenchmarkReaderRequest(b *testing.B) {
	body := `{"model":"Qwen/Qwen3-8B","prompt":"Hello, how are you today? Tell me about routers.","max_tokens":1,"ignore_eos":true}`
	in := []byte("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:18080\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		p := reader{lim: limits{maxHeader: 64 << 10, maxBody: 32 << 20}}
		if _, r, err := p.feed(in); err != nil || r == nil || r.Header.Get("content-type") != "application/json" {
			b.Fatal(err, r)
		}
	}
}
