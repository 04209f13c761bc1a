package passthrough

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// maxHead bounds an engine's response header, blank line included.
const maxHead = 64 << 10

// errHeadTooLarge: the engine's response header did not end within
// maxHead bytes.
var errHeadTooLarge = errors.New("engine's response header too large")

var headEnd = []byte("\r\n\r\n")

// readHead reads an engine's response with read until the blank line that
// ends its header. It returns what it read (the header and whatever of the
// body came in the same reads) and the header's length, blank line
// included. A header that does not end within maxHead bytes is refused the
// same however its bytes arrive in reads; each read is searched only
// where the end can newly be, so a header arriving a byte at a time costs
// no more than one arriving whole.
func readHead(read func([]byte) (int, error)) (head []byte, end int, err error) {
	buf := make([]byte, 16<<10)
	for {
		n, rerr := read(buf)
		from := max(len(head)-len(headEnd)+1, 0)
		head = append(head, buf[:n]...)
		if i := bytes.Index(head[from:], headEnd); i >= 0 {
			if end = from + i + len(headEnd); end > maxHead {
				return nil, 0, errHeadTooLarge
			}
			return head, end, nil
		}
		if len(head) >= maxHead { // an end still to come would end past maxHead
			return nil, 0, errHeadTooLarge
		}
		if rerr != nil {
			return nil, 0, fmt.Errorf("reading the engine's header: %w", rerr)
		}
	}
}

// parseHead reads a response header's status and how its body is
// delimited (RFC 9112 section 6.3). status is the three-digit code, 0 if
// the status line has none. A Transfer-Encoding overrides any
// Content-Length: the body is chunked when chunked is its last coding, and
// otherwise runs until the engine closes (length -1, chunked false).
// length is the Content-Length, or -1 when there is none or it cannot be
// trusted: not a number, or several fields or list members that disagree.
// The RFC calls those an unrecoverable error; -1 is the safe reading,
// since the relay then runs to the engine's close and tells the client to
// close too, where taking one of the values could leave the client's next
// response starting in the middle of this one. A Transfer-Encoding in a
// response that is not HTTP/1.1 or later is faulty framing too (RFC 9112
// section 6.1), read the same way: to the engine's close.
func parseHead(head []byte) (status int, length int64, chunked bool) {
	lines := bytes.Split(head, []byte("\r\n"))
	status = statusCode(lines[0])
	modern := atLeastHTTP11(lines[0])
	var te bool
	cl, clBad := int64(-1), false
	for i := 1; i < len(lines); i++ {
		name, value, ok := bytes.Cut(lines[i], []byte(":"))
		if !ok {
			continue
		}
		// obs-fold: a line starting with a space or tab continues the
		// field (RFC 9112 section 5.2 says to read it as one space).
		if i+1 < len(lines) && folded(lines[i+1]) {
			value = append([]byte(nil), value...)
			for i+1 < len(lines) && folded(lines[i+1]) {
				i++
				value = append(append(value, ' '), lines[i]...)
			}
		}
		switch {
		case bytes.EqualFold(name, []byte("content-length")):
			for _, v := range bytes.Split(value, []byte(",")) {
				n, ok := contentLength(bytes.Trim(v, " \t"))
				clBad = clBad || !ok || cl >= 0 && n != cl
				cl = n
			}
		case bytes.EqualFold(name, []byte("transfer-encoding")):
			te = true
			for _, coding := range bytes.Split(value, []byte(",")) {
				if coding = bytes.Trim(coding, " \t"); len(coding) > 0 { // empty list members do not count
					chunked = bytes.EqualFold(coding, []byte("chunked"))
				}
			}
		}
	}
	if te || clBad {
		return status, -1, chunked && modern
	}
	return status, cl, false
}

func folded(line []byte) bool { return len(line) > 0 && (line[0] == ' ' || line[0] == '\t') }

// statusCode reads the status code of a status line, "HTTP/1.1 200 OK":
// the second space-separated field if it is three digits from 100 up.
func statusCode(line []byte) int {
	_, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte(" "))
	if len(code) != 3 || code[0] < '1' || code[0] > '9' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9' {
		return 0
	}
	return int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
}

// atLeastHTTP11 reports whether a status line's version, "HTTP/1.1 200 OK",
// is 1.1 or later: one digit each side of the dot, as RFC 9112 section
// 2.3 writes it.
func atLeastHTTP11(line []byte) bool {
	v, ok := bytes.CutPrefix(line, []byte("HTTP/"))
	if !ok || len(v) < 3 || v[1] != '.' || v[0] < '0' || v[0] > '9' || v[2] < '0' || v[2] > '9' {
		return false
	}
	return v[0] > '1' || v[0] == '1' && v[2] >= '1'
}

// contentLength parses a Content-Length value: digits only (no sign, no
// space), at most math.MaxInt64.
func contentLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' || n > (math.MaxInt64-int64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
