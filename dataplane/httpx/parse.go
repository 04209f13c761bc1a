// Package httpx is kvgate's HTTP/1.1 server on gnet event loops: parsing
// (keep-alive, pipelining, Content-Length and chunked bodies, Expect:
// 100-continue) with hard limits, handlers run off the loop, and responses
// (whole or streamed with chunked encoding) written back in request order:
// straight from the handler's goroutine when nothing else of the
// connection is on its way (direct.go), otherwise whole ones with
// AsyncWrite and a stream's chunks through a per-connection write queue
// that the loop drains in one write per wake-up (outq.go), with bounded
// output buffering per connection. What runs on
// an event loop, and what may block one: dataplane/LOCKS.md.
//
// What a client can make the server hold is bounded: a header by
// Config.MaxHeaderBytes (trailers count against it too), a body by
// Config.MaxBodyBytes, what it pipelines behind a request in service by
// Config.PipelineWindow (reading stops there: TCP backpressure), and what
// waits to be written to it by Config.MaxPendingWrite. Every byte is
// parsed once (reader.go), so a request costs time and memory linear in
// its size however it is split across reads.
package httpx

import "strings"

// Request is a parsed HTTP request. Body is a copy owned by the handler.
type Request struct {
	Method, Path, RawQuery string
	Proto11                bool
	Header                 Header
	Body                   []byte
	RemoteAddr             string
	close                  bool
	raw                    []byte
	// fields hold the header's first fields and w the response's writer
	// (OnTraffic), in the request's one allocation.
	fields [headFields]Field
	w      ResponseWriter
}

// headFields is how many header fields a request holds in its own
// allocation: a client's usual few (Host, Content-Type, Content-Length,
// User-Agent, Accept, an auth field).
const headFields = 6

// Header is an ordered list of fields; lookups ignore case.
type Header []Field

// Field is one header field.
type Field struct{ Name, Value string }

// Get returns the first value of name.
func (h Header) Get(name string) string {
	for _, f := range h {
		if equalFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// parseError is a request the server must refuse, with the status to send.
type parseError struct {
	status int
	msg    string
}

func (e *parseError) Error() string { return e.msg }

// limits bound what one request may hold.
type limits struct {
	maxHeader int
	maxBody   int
}

// framing is how a request's body is delimited, as its header says.
type framing struct {
	contentLength int // -1: none
	chunked       bool
	expect100     bool
}

var crlf = []byte("\r\n")

// parseHead parses a complete request header (without its final empty
// line): the request line, then the fields.
// The head is copied once into a string that the method, path and
// fields are cut from, rather than a string each.
func parseHead(headBytes []byte) (*Request, framing, *parseError) {
	fr := framing{contentLength: -1}
	head := string(headBytes)
	lineEnd := strings.Index(head, "\r\n")
	if lineEnd < 0 {
		lineEnd = len(head)
	}
	req := new(Request)
	if n := strings.Count(head, "\r\n"); n <= headFields {
		req.Header = req.fields[:0]
	} else {
		req.Header = make(Header, 0, n)
	}
	if err := parseRequestLine(req, head[:lineEnd]); err != nil {
		return nil, fr, err
	}
	hosts := 0
	for rest := head[min(lineEnd+2, len(head)):]; len(rest) > 0; {
		line := rest
		if i := strings.Index(rest, "\r\n"); i >= 0 {
			line, rest = rest[:i], rest[i+2:]
		} else {
			rest = ""
		}
		f, err := parseField(line)
		if err != nil {
			return nil, fr, err
		}
		req.Header = append(req.Header, f)
		switch {
		case equalFold(f.Name, "Host"):
			hosts++
		case equalFold(f.Name, "Content-Length"):
			n, ok := parseContentLength(f.Value)
			if !ok || (fr.contentLength >= 0 && n != fr.contentLength) {
				return nil, fr, &parseError{400, "invalid Content-Length"}
			}
			fr.contentLength = n
		case equalFold(f.Name, "Transfer-Encoding"):
			if !equalFold(f.Value, "chunked") || fr.chunked {
				return nil, fr, &parseError{501, "unsupported Transfer-Encoding " + f.Value}
			}
			fr.chunked = true
		case equalFold(f.Name, "Connection"):
			if hasToken(f.Value, "close") {
				req.close = true
			}
		case equalFold(f.Name, "Expect"):
			if !equalFold(f.Value, "100-continue") {
				return nil, fr, &parseError{417, "unsupported Expect " + f.Value}
			}
			fr.expect100 = true
		}
	}
	// RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request
	// without a Host field, or with more than one.
	if req.Proto11 && hosts != 1 {
		return nil, fr, &parseError{400, "an HTTP/1.1 request needs exactly one Host header"}
	}
	if fr.chunked && fr.contentLength >= 0 {
		return nil, fr, &parseError{400, "both Content-Length and chunked"}
	}
	// RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 request is faulty
	// framing (a 1.0 intermediary would have read the body otherwise).
	if fr.chunked && !req.Proto11 {
		return nil, fr, &parseError{400, "Transfer-Encoding in an HTTP/1.0 request"}
	}
	if !req.Proto11 && !hasToken(req.Header.Get("Connection"), "keep-alive") {
		req.close = true
	}
	return req, fr, nil
}

// parseField reads one "name: value" line. The name must be a token and
// the value free of control characters (a bare CR or LF in a value would
// otherwise reach whatever reflects or logs it as a line break).
func parseField(line string) (Field, *parseError) {
	colon := strings.IndexByte(line, ':')
	if colon <= 0 || !isToken(line[:colon]) {
		return Field{}, &parseError{400, "malformed header line"}
	}
	value := strings.Trim(line[colon+1:], " \t")
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return Field{}, &parseError{400, "control character in the value of header " + line[:colon]}
		}
	}
	return Field{Name: line[:colon], Value: value}, nil
}

// parseContentLength accepts digits only (RFC 9110 8.6: 1*DIGIT), so
// "+2", "-1", " 2" or "0x2" are refused rather than read as numbers.
func parseContentLength(v string) (int, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		n = n*10 + int(v[i]-'0')
	}
	return n, true
}

// hasToken reports whether a comma-separated list holds tok (any case).
func hasToken(list, tok string) bool {
	for item := range strings.SplitSeq(list, ",") {
		if equalFold(strings.Trim(item, " \t"), tok) {
			return true
		}
	}
	return false
}

// isToken reports whether b is an RFC 9110 token (a method or field name).
func isToken(b string) bool {
	if len(b) == 0 {
		return false
	}
	for i := 0; i < len(b); i++ {
		if c := b[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func parseRequestLine(req *Request, line string) *parseError {
	sp1 := strings.IndexByte(line, ' ')
	sp2 := strings.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp2 <= sp1 || !isToken(line[:sp1]) {
		return &parseError{400, "malformed request line"}
	}
	req.Method = line[:sp1]
	target := line[sp1+1 : sp2]
	switch line[sp2+1:] {
	case "HTTP/1.1":
		req.Proto11 = true
	case "HTTP/1.0":
	default:
		return &parseError{505, "unsupported HTTP version"}
	}
	if len(target) == 0 || target[0] != '/' {
		return &parseError{400, "request target must be a path"}
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return &parseError{400, "malformed request target"}
		}
	}
	if q := strings.IndexByte(target, '?'); q >= 0 {
		req.Path, req.RawQuery = target[:q], target[q+1:]
	} else {
		req.Path = target
	}
	return nil
}
