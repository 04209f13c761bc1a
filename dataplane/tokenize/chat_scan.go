package tokenize

import (
	"bytes"
	"errors"
)

// errNotPlain is why a conversation leaves the incremental render: it is
// not one of the shapes the template's probes proved append-only.
var errNotPlain = errors.New("tokenize: not a plain conversation")

// nextElement finds the end of the JSON array element that starts at
// raw[from:] (just past the '[' or a ','): end is the offset of the ','
// or ']' that follows it, more whether that is a ','. ok is false when raw
// is not a well-formed array at the level of brackets and strings (the
// JSON decoder checks the rest) or the element is empty.
func nextElement(raw []byte, from int) (end int, more, ok bool) {
	depth, started := 0, false
	for i := from; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			close, _ := stringEnd(raw, i+1)
			if close < 0 {
				return 0, false, false
			}
			i, started = close, true
		case '{', '[':
			depth++
			started = true
		case '}', ']':
			if depth > 0 {
				depth--
				continue
			}
			return i, false, c == ']' && started
		case ',':
			if depth == 0 {
				return i, true, started
			}
		default:
			started = true
		}
	}
	return 0, false, false
}

// stringEnd returns the offset of the '"' that closes the JSON string
// whose body starts at raw[from], or -1, and whether the body holds a
// backslash. It jumps from quote to quote (a quote is escaped when an odd
// run of backslashes precedes it), so long strings scan at memory speed.
func stringEnd(raw []byte, from int) (int, bool) {
	for i := from; ; {
		k := bytes.IndexByte(raw[i:], '"')
		if k < 0 {
			return -1, false
		}
		q, n := i+k, 0
		for q-1-n >= from && raw[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q, bytes.IndexByte(raw[from:q], '\\') >= 0
		}
		i = q + 1
	}
}

// trimElement returns raw[start:end] without surrounding whitespace.
func trimElement(raw []byte, start, end int) []byte {
	for start < end && isJSONSpace(raw[start]) {
		start++
	}
	for end > start && isJSONSpace(raw[end-1]) {
		end--
	}
	return raw[start:end]
}

// commaAt returns the offset of the ',' that raw[i:] starts with after
// whitespace, if it does.
func commaAt(raw []byte, i int) (int, bool) {
	for i < len(raw) && isJSONSpace(raw[i]) {
		i++
	}
	return i, i < len(raw) && raw[i] == ','
}

// endOf returns end moved back over whitespace.
func endOf(raw []byte, end int) int {
	for end > 0 && isJSONSpace(raw[end-1]) {
		end--
	}
	return end
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// plainMessage is a message of a plain conversation: a role and a string
// content, nothing else.
type plainMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// plainRole returns the role of a plain message: an object of exactly the
// keys "role" and "content" (unescaped, once each), content a string and
// role system, user or assistant, unescaped. It reads the bytes in one
// pass and checks no more than that: the template's decoder reads the
// message whole. content is the content's JSON string body between its
// quotes, escaped whether it holds a backslash.
func plainRole(raw []byte) (role string, content []byte, escaped bool, err error) {
	i, seen := 0, 0
	skip := func() {
		for i < len(raw) && isJSONSpace(raw[i]) {
			i++
		}
	}
	str := func() ([]byte, bool, bool) { // the string at raw[i], whether it is plain
		if i >= len(raw) || raw[i] != '"' {
			return nil, false, false
		}
		start := i + 1
		end, escaped := stringEnd(raw, start)
		if end < 0 {
			return nil, false, false
		}
		i = end + 1
		return raw[start:end], !escaped, true
	}
	skip()
	if i >= len(raw) || raw[i] != '{' {
		return "", nil, false, errNotPlain
	}
	i++
	for pair := range 2 {
		skip()
		key, plain, ok := str()
		if !ok || !plain {
			return "", nil, false, errNotPlain
		}
		skip()
		if i >= len(raw) || raw[i] != ':' {
			return "", nil, false, errNotPlain
		}
		i++
		skip()
		val, valPlain, ok := str()
		if !ok {
			return "", nil, false, errNotPlain
		}
		switch string(key) {
		case "role":
			if !valPlain || seen&1 != 0 {
				return "", nil, false, errNotPlain
			}
			role, seen = roleName(val), seen|1
		case "content":
			if seen&2 != 0 {
				return "", nil, false, errNotPlain
			}
			content, escaped, seen = val, !valPlain, seen|2
		default:
			return "", nil, false, errNotPlain
		}
		skip()
		if pair == 0 {
			if i >= len(raw) || raw[i] != ',' {
				return "", nil, false, errNotPlain
			}
			i++
		}
	}
	skip()
	if seen != 3 || i >= len(raw) || raw[i] != '}' {
		return "", nil, false, errNotPlain
	}
	i++
	if skip(); i != len(raw) {
		return "", nil, false, errNotPlain
	}
	if role == "" {
		return "", nil, false, errNotPlain
	}
	return role, content, escaped, nil
}

// roleName returns the role spelled by b when it is system, user or
// assistant, else "", without allocating.
func roleName(b []byte) string {
	switch string(b) {
	case "system":
		return "system"
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	}
	return ""
}
