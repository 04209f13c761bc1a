// Package httpx is kvgate's HTTP/1.1 server on gnet event loops: parsing
// (keep-alive, pipelining, Content-Length and chunked bodies, Expect:
// 100-continue) with hard limits, handlers run off the loop, and responses
// (whole or streamed with chunked encoding) written back with AsyncWrite in
// request order, with bounded output buffering per connection. What runs on
// an event loop, and what may block one: dataplane/LOCKS.md.
package httpx

import (
	"bytes"
	"strconv"
)

// Request is a parsed HTTP request. Body is a copy owned by the handler.
type Request struct {
	Method, Path, RawQuery string
	Proto11                bool
	Header                 Header
	Body                   []byte
	RemoteAddr             string
	close                  bool
	raw                    []byte
}

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

// parseResult is the outcome of looking at the buffered bytes.
type parseResult struct {
	req        *Request
	consumed   int
	headerDone bool // the header is complete (the body may not be)
	expect100  bool
}

var crlf = []byte("\r\n")

// parse reads one request from b. With a nil req and nil error, more bytes
// are needed.
func parse(b []byte, lim limits) (parseResult, *parseError) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > lim.maxHeader {
			return parseResult{}, &parseError{431, "request header too large"}
		}
		return parseResult{}, nil
	}
	if end+4 > lim.maxHeader {
		return parseResult{}, &parseError{431, "request header too large"}
	}
	head := b[:end]
	lineEnd := bytes.Index(head, crlf)
	if lineEnd < 0 {
		lineEnd = len(head)
	}
	req := &Request{}
	if err := parseRequestLine(req, head[:lineEnd]); err != nil {
		return parseResult{}, err
	}
	var contentLength = -1
	chunked, expect := false, false
	for rest := head[min(lineEnd+2, len(head)):]; len(rest) > 0; {
		line := rest
		if i := bytes.Index(rest, crlf); i >= 0 {
			line, rest = rest[:i], rest[i+2:]
		} else {
			rest = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.ContainsAny(line[:colon], " \t") {
			return parseResult{}, &parseError{400, "malformed header line"}
		}
		f := Field{Name: string(line[:colon]), Value: string(bytes.TrimSpace(line[colon+1:]))}
		req.Header = append(req.Header, f)
		switch {
		case equalFold(f.Name, "Content-Length"):
			n, err := strconv.Atoi(f.Value)
			if err != nil || n < 0 || (contentLength >= 0 && n != contentLength) {
				return parseResult{}, &parseError{400, "invalid Content-Length"}
			}
			contentLength = n
		case equalFold(f.Name, "Transfer-Encoding"):
			if !equalFold(f.Value, "chunked") {
				return parseResult{}, &parseError{501, "unsupported Transfer-Encoding " + f.Value}
			}
			chunked = true
		case equalFold(f.Name, "Connection"):
			if equalFold(f.Value, "close") {
				req.close = true
			}
		case equalFold(f.Name, "Expect"):
			if !equalFold(f.Value, "100-continue") {
				return parseResult{}, &parseError{417, "unsupported Expect " + f.Value}
			}
			expect = true
		}
	}
	if chunked && contentLength >= 0 {
		return parseResult{}, &parseError{400, "both Content-Length and chunked"}
	}
	if !req.Proto11 && req.Header.Get("Connection") != "keep-alive" {
		req.close = true
	}
	res := parseResult{headerDone: true, expect100: expect}
	bodyStart := end + 4
	switch {
	case chunked:
		body, n, perr := parseChunked(b[bodyStart:], lim.maxBody)
		if perr != nil {
			return res, perr
		}
		if n == 0 {
			return res, nil
		}
		req.Body, res.consumed = body, bodyStart+n
	case contentLength > lim.maxBody:
		return res, &parseError{413, "request body too large"}
	case contentLength > 0:
		if len(b)-bodyStart < contentLength {
			return res, nil
		}
		req.Body = append([]byte(nil), b[bodyStart:bodyStart+contentLength]...)
		res.consumed = bodyStart + contentLength
	default:
		res.consumed = bodyStart
	}
	res.req = req
	return res, nil
}

func parseRequestLine(req *Request, line []byte) *parseError {
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp2 <= sp1 {
		return &parseError{400, "malformed request line"}
	}
	req.Method = string(line[:sp1])
	target := line[sp1+1 : sp2]
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		req.Proto11 = true
	case "HTTP/1.0":
	default:
		return &parseError{505, "unsupported HTTP version"}
	}
	if len(target) == 0 || target[0] != '/' {
		return &parseError{400, "request target must be a path"}
	}
	if q := bytes.IndexByte(target, '?'); q >= 0 {
		req.Path, req.RawQuery = string(target[:q]), string(target[q+1:])
	} else {
		req.Path = string(target)
	}
	return nil
}

// parseChunked decodes a whole chunked body; n is 0 while incomplete.
func parseChunked(b []byte, maxBody int) (body []byte, n int, err *parseError) {
	pos := 0
	for {
		i := bytes.Index(b[pos:], crlf)
		if i < 0 {
			if len(b)-pos > 64 {
				return nil, 0, &parseError{400, "malformed chunk size"}
			}
			return nil, 0, nil
		}
		sizeField := b[pos : pos+i]
		if semi := bytes.IndexByte(sizeField, ';'); semi >= 0 {
			sizeField = sizeField[:semi] // chunk extensions are ignored
		}
		size, perr := strconv.ParseUint(string(bytes.TrimSpace(sizeField)), 16, 31)
		if perr != nil {
			return nil, 0, &parseError{400, "malformed chunk size"}
		}
		pos += i + 2
		if size == 0 {
			// Trailer fields end with an empty line.
			j := bytes.Index(b[pos:], []byte("\r\n"))
			for j > 0 {
				pos += j + 2
				j = bytes.Index(b[pos:], crlf)
			}
			if j < 0 {
				return nil, 0, nil
			}
			return body, pos + 2, nil
		}
		if len(body)+int(size) > maxBody {
			return nil, 0, &parseError{413, "request body too large"}
		}
		if len(b)-pos < int(size)+2 {
			return nil, 0, nil
		}
		body = append(body, b[pos:pos+int(size)]...)
		pos += int(size)
		if !bytes.HasPrefix(b[pos:], crlf) {
			return nil, 0, &parseError{400, "malformed chunk"}
		}
		pos += 2
	}
}
