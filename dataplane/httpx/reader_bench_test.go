package httpx

import (
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
