package httpx

import (
	"strings"
	"testing"
)

var lim = limits{maxHeader: 8 << 10, maxBody: 1 << 16}

func TestParse(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		path   string
		body   string
		status int // 0: parsed
		more   bool
	}{
		{name: "get", in: "GET /health?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", path: "/health"},
		{name: "content-length", in: "POST /v1/completions HTTP/1.1\r\nHost: a\r\ncontent-length: 2\r\n\r\n{}", path: "/v1/completions", body: "{}"},
		{name: "chunked", in: "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n", path: "/x", body: "abcde"},
		{name: "partial header", in: "GET /health HTTP/1.1\r\nHost:", more: true},
		{name: "partial body", in: "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n12345", more: true},
		{name: "partial chunk", in: "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", more: true},
		{name: "bad line", in: "NONSENSE\r\n\r\n", status: 400},
		{name: "absolute target", in: "GET http://x/ HTTP/1.1\r\n\r\n", status: 400},
		{name: "http2", in: "GET / HTTP/2.0\r\n\r\n", status: 505},
		{name: "bad length", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", status: 400},
		{name: "conflicting lengths", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", status: 400},
		{name: "length and chunked", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "gzip encoding", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", status: 501},
		{name: "body too large", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", status: 413},
		{name: "chunked too large", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffff\r\n", status: 413},
		{name: "header too large", in: "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 9000), status: 431},
		{name: "space before colon", in: "GET / HTTP/1.1\r\nX : y\r\n\r\n", status: 400},
		{name: "expect", in: "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", more: true},
		{name: "no host", in: "GET / HTTP/1.1\r\n\r\n", status: 400},
		{name: "two hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400},
		{name: "chunked in 1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400},
		{name: "no host in 1.0", in: "GET / HTTP/1.0\r\n\r\n", path: "/"},
		{name: "signed length", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +2\r\n\r\nab", status: 400},
		{name: "spaced length", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2 2\r\n\r\nab", status: 400},
		{name: "hex length", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x2\r\n\r\nab", status: 400},
		{name: "bare LF in a value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a\nSet-Cookie: x\r\n\r\n", status: 400},
		{name: "bare CR in a value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Request-Id: a\rSet-Cookie: x\r\n\r\n", status: 400},
		{name: "NUL in a value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", status: 400},
		{name: "bad method", in: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
		{name: "trailer too large", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + strings.Repeat("a", 9000) + "\r\n\r\n", status: 431},
		{name: "many trailers", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + strings.Repeat("X: a\r\n", 2000) + "\r\n", status: 431},
		{name: "bad trailer", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nnocolon\r\n\r\n", status: 400},
		{name: "long chunk line", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", 2000), status: 400},
		{name: "chunk without CRLF", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY", status: 400},
		{name: "connection list", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n", path: "/"},
		{name: "bad expect", in: "POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n", status: 417},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := parse([]byte(c.in), lim)
			switch {
			case c.status != 0:
				if err == nil || err.status != c.status {
					t.Fatalf("got %v, want status %d", err, c.status)
				}
			case c.more:
				if err != nil || res.req != nil {
					t.Fatalf("want more bytes, got %v %+v", err, res.req)
				}
			default:
				if err != nil || res.req == nil || res.req.Path != c.path || string(res.req.Body) != c.body || res.consumed != len(c.in) {
					t.Fatalf("got %v %+v consumed %d", err, res.req, res.consumed)
				}
			}
		})
	}
}

func TestParseKeepAliveAndPipelining(t *testing.T) {
	in := "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.0\r\n\r\nGET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
	b := []byte(in)
	var got []string
	for len(b) > 0 {
		res, err := parse(b, lim)
		if err != nil || res.req == nil {
			t.Fatalf("%v %+v", err, res)
		}
		got = append(got, res.req.Path+map[bool]string{true: ":close", false: ""}[res.req.close])
		b = b[res.consumed:]
	}
	if strings.Join(got, " ") != "/a /b:close /c:close" {
		t.Fatalf("%v", got)
	}
	if h := (Header{{"Content-Type", "x"}}); h.Get("content-type") != "x" || h.Get("content-typ") != "" {
		t.Fatal("header lookup")
	}
}

// FuzzParse: no input panics or allocates beyond the limits, a parsed
// request never consumes more than it was given, and feeding the input in
// two pieces, split anywhere, parses as feeding it whole (the reader
// keeps its state across reads).
func FuzzParse(f *testing.F) {
	f.Add([]byte("GET /health HTTP/1.1\r\nHost: a\r\n\r\n"), 7)
	f.Add([]byte("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"), 40)
	f.Add([]byte("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: x\r\n\r\n"), 60)
	f.Add([]byte("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n"), 20)
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		whole, werr := parse(in, lim)
		if werr != nil && (werr.status < 400 || werr.status > 505) {
			t.Fatalf("status %d", werr.status)
		}
		if whole.req != nil && (whole.consumed > len(in) || len(whole.req.Body) > lim.maxBody) {
			t.Fatalf("consumed %d of %d, body %d", whole.consumed, len(in), len(whole.req.Body))
		}
		split = min(max(split, 0), len(in))
		p := reader{lim: lim}
		n, req, err := p.feed(in[:split])
		if err == nil && req == nil {
			var m int
			m, req, err = p.feed(in[split:])
			n += m
		}
		if (err == nil) != (werr == nil) || (err != nil && err.status != werr.status) {
			t.Fatalf("split at %d: %v, whole: %v", split, err, werr)
		}
		if (req == nil) != (whole.req == nil) || req != nil && (n != whole.consumed || req.Path != whole.req.Path || string(req.Body) != string(whole.req.Body)) {
			t.Fatalf("split at %d: %+v (%d bytes), whole: %+v (%d bytes)", split, req, n, whole.req, whole.consumed)
		}
	})
}
