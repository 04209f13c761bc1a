package httpx

import (
	"bytes"
	"strconv"
)

// reader parses requests from a connection's byte stream as the bytes
// arrive, one request at a time, and looks at each byte once: a header
// is searched from where the last search stopped, a body is copied
// straight into a buffer of its announced size (or grown chunk by
// chunk), so however a client splits a request across reads, parsing
// costs time and memory linear in the request's size. It runs on the
// connection's event loop only.
//
//	header  ->  (Content-Length) body  ->  request
//	        ->  (chunked) size line -> data -> CRLF -> ... -> 0 -> trailer lines -> request
type reader struct {
	lim     limits
	keepRaw bool
	state   readState
	hdr     []byte // the header so far, up to lim.maxHeader
	scanned int    // hdr bytes already searched for the header's end
	req     *Request
	fr      framing
	need    int    // body (or chunk) bytes still to come
	line    []byte // a chunk-size line, chunk CRLF or trailer line in progress
	framed  int    // chunk framing bytes so far
	trailer int    // trailer bytes so far
	raw     []byte // the request as sent (keepRaw)
}

type readState uint8

const (
	readHeader readState = iota
	readBody
	readChunkSize
	readChunkData
	readChunkEnd
	readTrailer
)

// maxChunkLine bounds a chunk-size line with its extensions.
const maxChunkLine = 1024

// started reports whether some bytes of the next request have arrived.
func (p *reader) started() bool { return p.state != readHeader || len(p.hdr) > 0 }

// headerDone reports whether the header is parsed and the body awaited.
func (p *reader) headerDone() bool { return p.state != readHeader }

// expect100 reports whether the request in progress asked for 100-continue.
func (p *reader) expect100() bool { return p.state != readHeader && p.fr.expect100 }

// feed consumes bytes of b until one request is complete (req != nil) or
// b is used up; n says how many bytes it took. After an error the reader
// must not be fed again.
func (p *reader) feed(b []byte) (n int, req *Request, perr *parseError) {
	for n < len(b) || p.complete() {
		if p.complete() {
			return n, p.finish(), nil
		}
		var used int
		switch p.state {
		case readHeader:
			used, perr = p.header(b[n:])
		case readBody:
			used = min(p.need, len(b)-n)
			p.req.Body = append(p.req.Body, b[n:n+used]...)
			p.need -= used
		case readChunkSize, readChunkEnd, readTrailer:
			used, perr = p.framingLine(b[n:])
		case readChunkData:
			used = min(p.need, len(b)-n)
			p.req.Body = append(p.req.Body, b[n:n+used]...)
			p.need -= used
			if p.need == 0 {
				p.state = readChunkEnd
			}
		}
		if perr != nil {
			return n, nil, perr
		}
		if p.keepRaw {
			p.raw = append(p.raw, b[n:n+used]...)
		}
		n += used
	}
	return n, nil, nil
}

// complete reports whether the request in progress has all its bytes.
func (p *reader) complete() bool { return p.req != nil && p.state == readBody && p.need == 0 }

// finish hands the complete request over and readies the reader for the
// next one, releasing what it held at once.
func (p *reader) finish() *Request {
	req := p.req
	req.raw = p.raw
	*p = reader{lim: p.lim, keepRaw: p.keepRaw}
	return req
}

// headEnd is the empty line that ends a header.
var headEnd = []byte("\r\n\r\n")

// header takes bytes of the header until its empty line, and parses it.
// A header that arrives whole in one read is parsed where it lies; one
// split across reads is gathered in hdr.
func (p *reader) header(b []byte) (int, *parseError) {
	room := p.lim.maxHeader - len(p.hdr)
	take := b[:min(len(b), room+1)]
	if len(p.hdr) == 0 {
		if end := bytes.Index(take, headEnd); end >= 0 {
			return end + 4, p.head(take[:end])
		}
	}
	p.hdr = append(p.hdr, take...)
	from := max(0, p.scanned-3)
	end := bytes.Index(p.hdr[from:], headEnd)
	if end < 0 {
		if len(p.hdr) > p.lim.maxHeader {
			return 0, &parseError{431, "request header too large"}
		}
		p.scanned = len(p.hdr)
		return len(take), nil
	}
	end += from
	used := len(take) - (len(p.hdr) - (end + 4))
	return used, p.head(p.hdr[:end])
}

// head parses a complete header (parseHead copies what it keeps) and
// readies the reader for the body.
func (p *reader) head(b []byte) *parseError {
	req, fr, perr := parseHead(b)
	if perr != nil {
		return perr
	}
	p.req, p.fr, p.hdr = req, fr, nil
	switch {
	case fr.chunked:
		p.state = readChunkSize
	case fr.contentLength > p.lim.maxBody:
		return &parseError{413, "request body too large"}
	default:
		p.state, p.need = readBody, max(fr.contentLength, 0)
		if p.need > 0 {
			p.req.Body = make([]byte, 0, p.need)
		}
	}
	return nil
}

// framingLine takes bytes of a chunk-size line, the CRLF after a chunk's
// data, or a trailer line; a whole line moves the reader on.
func (p *reader) framingLine(b []byte) (int, *parseError) {
	i := bytes.IndexByte(b, '\n')
	used := len(b)
	if i >= 0 {
		used = i + 1
	}
	p.line = append(p.line, b[:used]...)
	switch {
	case p.state == readTrailer:
		if p.trailer += used; p.trailer > p.lim.maxHeader {
			return 0, &parseError{431, "request trailers too large"}
		}
	case p.state == readChunkEnd && !bytes.HasPrefix(crlf, p.line):
		return 0, &parseError{400, "malformed chunk: no CRLF after its data"}
	case len(p.line) > maxChunkLine:
		return 0, &parseError{400, "malformed chunk size"}
	default:
		if p.framed += used; p.framed > max(p.lim.maxHeader, p.lim.maxBody/16) {
			return 0, &parseError{400, "too much chunk framing"}
		}
	}
	if i < 0 {
		return used, nil
	}
	line := p.line
	p.line = p.line[:0]
	if !bytes.HasSuffix(line, crlf) {
		return 0, &parseError{400, "malformed chunk: lines end with CRLF"}
	}
	line = line[:len(line)-2]
	switch p.state {
	case readChunkEnd:
		if len(line) != 0 {
			return 0, &parseError{400, "malformed chunk"}
		}
		p.state = readChunkSize
	case readTrailer:
		if len(line) == 0 {
			p.state, p.need = readBody, 0 // the request is complete
		} else if _, err := parseField(string(line)); err != nil {
			return 0, err
		}
	case readChunkSize:
		return used, p.chunkSize(line)
	}
	return used, nil
}

func (p *reader) chunkSize(line []byte) *parseError {
	if semi := bytes.IndexByte(line, ';'); semi >= 0 {
		line = line[:semi] // chunk extensions are ignored
	}
	size, err := strconv.ParseUint(string(bytes.TrimRight(line, " \t")), 16, 31)
	if err != nil || len(line) == 0 || line[0] == '+' {
		return &parseError{400, "malformed chunk size"}
	}
	if size == 0 {
		p.state = readTrailer
		return nil
	}
	if len(p.req.Body)+int(size) > p.lim.maxBody {
		return &parseError{413, "request body too large"}
	}
	if p.req.Body == nil {
		p.req.Body = make([]byte, 0, min(int(size), 64<<10))
	}
	p.state, p.need = readChunkData, int(size)
	return nil
}

// parseResult is the outcome of parsing a whole buffer at once (tests).
type parseResult struct {
	req      *Request
	consumed int
}

// parse reads one request from b, as a reader fed b in one piece would.
// With a nil req and nil error, more bytes are needed.
func parse(b []byte, lim limits) (parseResult, *parseError) {
	p := reader{lim: lim}
	n, req, err := p.feed(b)
	return parseResult{req: req, consumed: n}, err
}
