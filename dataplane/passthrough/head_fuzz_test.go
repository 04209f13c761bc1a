package passthrough

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// realHeads are response heads as engines send them to kvgate (which asks
// for Connection: close), with the first body bytes that come in the same
// read: vLLM and SGLang answer through uvicorn (lower-case field names,
// chunked for streams, Content-Length otherwise), llama.cpp's server
// through cpp-httplib (fields sorted, Connection: close echoed).
var realHeads = map[string]string{
	"vllm-stream": "HTTP/1.1 200 OK\r\ndate: Mon, 01 Dec 2025 08:47:12 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n" +
		"cf\r\ndata: {\"id\":\"cmpl-8d2f\",\"object\":\"text_completion\",\"created\":1764578832,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"text\":\" Paris\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n\r\n",
	"vllm-json": "HTTP/1.1 200 OK\r\ndate: Mon, 01 Dec 2025 08:47:13 GMT\r\nserver: uvicorn\r\ncontent-length: 336\r\ncontent-type: application/json\r\n\r\n" +
		`{"id":"cmpl-91ab","object":"text_completion","created":1764578833,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" Paris.","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":null}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2,"prompt_tokens_details":null},"kv_transfer_params":null}`,
	"vllm-404": "HTTP/1.1 404 Not Found\r\ndate: Mon, 01 Dec 2025 08:47:14 GMT\r\nserver: uvicorn\r\ncontent-length: 116\r\ncontent-type: application/json\r\n\r\n" +
		`{"error":{"message":"The model ` + "`Qwen/Qwen3-32B`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`,
	"uvicorn-500": "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: 21\r\n\r\nInternal Server Error",
	"llamacpp-stream": "HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: \r\nConnection: close\r\nContent-Type: text/event-stream\r\nServer: llama.cpp\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"96\r\ndata: {\"choices\":[{\"text\":\" Paris\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}],\"created\":1764578840,\"model\":\"qwen3\",\"object\":\"text_completion\"}\n\n\r\n",
	"llamacpp-json": "HTTP/1.1 200 OK\r\nAccess-Control-Allow-Origin: \r\nConnection: close\r\nContent-Length: 2\r\nContent-Type: application/json; charset=utf-8\r\nServer: llama.cpp\r\n\r\n{}",
	"llamacpp-503": "HTTP/1.1 503 Service Unavailable\r\nAccess-Control-Allow-Origin: \r\nConnection: close\r\nContent-Length: 75\r\nContent-Type: application/json; charset=utf-8\r\nServer: llama.cpp\r\n\r\n" +
		`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
	"http10-close": "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {}\n\n",
}

// TestParseHeadFraming: the engines' real heads, and heads whose framing
// the RFC calls an error, read as the relay must take them.
func TestParseHeadFraming(t *testing.T) {
	for _, c := range []struct {
		name, head string
		status     int
		length     int64
		chunked    bool
	}{
		{"vllm-stream", realHeads["vllm-stream"], 200, -1, true},
		{"vllm-json", realHeads["vllm-json"], 200, 336, false},
		{"vllm-404", realHeads["vllm-404"], 404, 116, false},
		{"llamacpp-stream", realHeads["llamacpp-stream"], 200, -1, true},
		{"llamacpp-503", realHeads["llamacpp-503"], 503, 75, false},
		{"http10-close", realHeads["http10-close"], 200, -1, false},
		{"http10 chunked", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, false},
		{"http10 chunked and length", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 200, -1, false},
		{"http2 chunked", "HTTP/2.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Length: 5\r\n\r\n", 200, -1, false},
		{"equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5, 5\r\n\r\n", 200, 5, false},
		{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", 200, -1, false},
		{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true},
		{"chunked not last", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nContent-Length: 5\r\n\r\n", 200, -1, false},
		{"folded length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n 6\r\n\r\n", 200, -1, false},
		{"no status", "HTTP/1.1 -20 OK\r\nContent-Length: 5\r\n\r\n", 0, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			head, end, err := readHead(strings.NewReader(c.head).Read)
			if err != nil {
				t.Fatal(err)
			}
			if status, length, chunked := parseHead(head[:end]); status != c.status || length != c.length || chunked != c.chunked {
				t.Fatalf("status %d length %d chunked %v, want %d %d %v", status, length, chunked, c.status, c.length, c.chunked)
			}
		})
	}
}

// TestReadHeadBound: a header is refused when its blank line ends past
// maxHead, and only then, however it arrives.
func TestReadHeadBound(t *testing.T) {
	for _, size := range []int{maxHead, maxHead + 1} {
		head := "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", size-len("HTTP/1.1 200 OK\r\nX: \r\n\r\n")) + "\r\n\r\nbody"
		for _, piece := range []int{1, 7, 16 << 10, len(head)} {
			_, end, err := readHead((&pieceReader{data: []byte(head), n: piece}).Read)
			if (size <= maxHead) != (err == nil) || err == nil && end != size || err != nil && !errors.Is(err, errHeadTooLarge) {
				t.Fatalf("%d-byte header in reads of %d: end %d, %v", size, piece, end, err)
			}
		}
	}
}

// FuzzParseHead feeds an engine's response, arbitrary or real, in reads of
// a fuzzed size through readHead and parseHead. The header ends where its
// first blank line ends, whatever the reads; the status is 0 or three
// digits; a length is only ever one that every Content-Length of the
// header states, with no Transfer-Encoding; and where Go's own HTTP client
// reads a clean header, it reads the same status and framing. Seeds are
// the real heads above, whole and in reads of 1, 5 and 64 bytes (split
// mid-line).
func FuzzParseHead(f *testing.F) {
	for _, name := range []string{"vllm-stream", "vllm-json", "vllm-404", "uvicorn-500", "llamacpp-stream", "llamacpp-json", "llamacpp-503", "http10-close"} {
		for _, n := range []uint16{0, 1, 5, 64} {
			f.Add([]byte(realHeads[name]), n)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, piece uint16) {
		head, end, err := readHead(bytes.NewReader(data).Read)
		if piece > 0 {
			h2, e2, err2 := readHead((&pieceReader{data: data, n: int(piece)}).Read)
			if (err == nil) != (err2 == nil) || e2 != end || err == nil && !bytes.Equal(h2[:e2], head[:end]) {
				t.Fatalf("in reads of %d: end %d, %v; whole: end %d, %v", piece, e2, err2, end, err)
			}
		}
		i := bytes.Index(data, headEnd)
		if err != nil {
			if i >= 0 && i+len(headEnd) <= maxHead {
				t.Fatalf("header ending at %d refused: %v", i+len(headEnd), err)
			}
			return
		}
		if end != i+len(headEnd) || !bytes.HasPrefix(data, head) {
			t.Fatalf("header end %d, blank line at %d", end, i)
		}
		h := head[:end]
		status, length, chunked := parseHead(h)
		if status != 0 && (status < 100 || status > 999) || length < -1 || chunked && length >= 0 {
			t.Fatalf("status %d length %d chunked %v", status, length, chunked)
		}
		te, lengths := framingFields(h)
		if length >= 0 {
			if te {
				t.Fatalf("length %d despite a Transfer-Encoding", length)
			}
			for _, v := range lengths {
				if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != length {
					t.Fatalf("length %d, but a Content-Length says %q", length, v)
				}
			}
		}
		if chunked && !te {
			t.Fatal("chunked without a Transfer-Encoding")
		}
		compareWithNetHTTP(t, h, status, length, chunked)
	})
}

// framingFields lists, field by field, whether the header has a
// Transfer-Encoding and the members of its Content-Length fields, with
// each obs-fold (a line starting with a space or tab) read as one space.
func framingFields(h []byte) (te bool, lengths []string) {
	var fields []string
	for _, l := range strings.Split(string(h), "\r\n")[1:] {
		if n := len(fields); n > 0 && l != "" && (l[0] == ' ' || l[0] == '\t') {
			fields[n-1] += " " + l
			continue
		}
		fields = append(fields, l)
	}
	for _, l := range fields {
		name, value, ok := strings.Cut(l, ":")
		switch {
		case !ok:
		case strings.EqualFold(name, "transfer-encoding"):
			te = true
		case strings.EqualFold(name, "content-length"):
			for _, v := range strings.Split(value, ",") {
				lengths = append(lengths, strings.Trim(v, " \t"))
			}
		}
	}
	return te, lengths
}

// compareWithNetHTTP checks parseHead against net/http's reading of a
// header it accepts, where the header uses only CRLF line ends (net/http
// also takes a bare LF, which kvgate, reading CRLF only, treats as part of
// a line: the safe reading, close-delimited) and the status has a body.
func compareWithNetHTTP(t *testing.T, h []byte, status int, length int64, chunked bool) {
	t.Helper()
	if bytes.Count(h, []byte("\r")) != bytes.Count(h, []byte("\n")) || bytes.Count(h, []byte("\r\n")) != bytes.Count(h, []byte("\n")) {
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(h)), nil)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 100 && resp.StatusCode <= 999 && resp.StatusCode != status {
		t.Fatalf("status %d, net/http reads %d", status, resp.StatusCode)
	}
	if resp.StatusCode/100 == 1 || resp.StatusCode == 204 || resp.StatusCode == 304 {
		return // no body whatever the fields say
	}
	if te, _ := framingFields(h); te && !resp.ProtoAtLeast(1, 1) {
		// net/http drops a Transfer-Encoding from an HTTP/1.0 response and
		// keeps its Content-Length; RFC 9112 section 6.1 calls the framing
		// faulty, which kvgate reads to the close.
		if length != -1 || chunked {
			t.Fatalf("HTTP/1.0 with a Transfer-Encoding: length %d chunked %v, want -1 false", length, chunked)
		}
		return
	}
	wantChunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
	if chunked != wantChunked || !chunked && length != resp.ContentLength {
		t.Fatalf("length %d chunked %v; net/http reads length %d, transfer encoding %q", length, chunked, resp.ContentLength, resp.TransferEncoding)
	}
}

// pieceReader hands out its data n bytes a read, as a socket might.
type pieceReader struct {
	data []byte
	n    int
}

func (p *pieceReader) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(b), p.n, len(p.data))
	copy(b, p.data[:k])
	p.data = p.data[k:]
	return k, nil
}
