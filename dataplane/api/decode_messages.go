package api

import (
	"encoding/json"
	"strings"
)

// normalizePlain is normalizeMessages by the walker (decode_scan.go) for
// a list whose messages are all objects with plain keys (printable ASCII,
// no escapes, none of the <, > and & that encoding/json writes escaped):
// each member goes through the same messageState as normalizeJSON's, its
// key written back as encoding/json would write it, its value as it came.
// ok is false, with nothing decided, for any other list: not valid JSON,
// empty, or holding a message that is not plain.
//
// Errors agree with normalizeJSON's because messages are read in the
// same order by the same code, and an error is only given once the rest
// of the list is known to be valid JSON (encoding/json refuses a list
// with a syntax error anywhere before it reads any message).
func normalizePlain(raw json.RawMessage, sink *imageSink) (out json.RawMessage, ok bool, err error) {
	list := jsonWalker{b: raw}
	list.space()
	if out, ok, err = normalizePlainAt(&list, sink); ok && !list.atEnd() {
		return nil, false, nil
	}
	return out, ok, err
}

// normalizePlainAt is normalizePlain of the list at list's place in a
// larger text (a body), which it moves list past.
func normalizePlainAt(list *jsonWalker, sink *imageSink) (out json.RawMessage, ok bool, err error) {
	raw, first := list.b, list.i
	if list.i >= len(raw) || raw[list.i] != '[' {
		return nil, false, nil
	}
	list.i++
	buf := make([]byte, 0, len(raw)-first) // at most what is left of the text
	buf = append(buf, '[')
	for i := 0; ; i++ {
		list.space()
		if list.i < len(raw) && raw[list.i] == ']' && i == 0 {
			return nil, false, nil // empty: encoding/json's error
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		var plain bool
		if buf, plain, err = normalizePlainMessage(buf, list, i, sink); !plain {
			return nil, false, nil
		}
		if err != nil {
			// encoding/json refuses a list with bad syntax anywhere (in
			// the rest of this message too) before reading any message.
			whole := jsonWalker{b: raw, i: first}
			ok = whole.value()
			list.i = whole.i
			return nil, ok, err
		}
		list.space()
		if list.i >= len(raw) {
			return nil, false, nil
		}
		c := raw[list.i]
		list.i++
		if c == ']' {
			break
		}
		if c != ',' {
			return nil, false, nil
		}
	}
	return append(buf, ']'), true, nil
}

// normalizePlainMessage appends message i, at list's place, normalized,
// to buf and moves list past it; plain is false when the message is not
// one the walker takes.
func normalizePlainMessage(buf []byte, list *jsonWalker, i int, sink *imageSink) (_ []byte, plain bool, _ error) {
	if list.i >= len(list.b) || list.b[list.i] != '{' {
		return buf, false, nil
	}
	buf = append(buf, '{')
	n := newMessageState(i, sink)
	w := jsonWalker{b: list.b, i: list.i}
	defer func() { list.i = w.i }()
	for first := true; w.next(); first = false {
		if strings.ContainsAny(string(w.key), "<>&") {
			return buf, false, nil
		}
		v, err := n.member(string(w.key), w.val)
		if err != nil {
			return buf, true, err
		}
		if !first {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = append(buf, w.key...)
		buf = append(buf, '"', ':')
		buf = append(buf, v...)
	}
	if !w.ended() {
		return buf, false, nil
	}
	if err := n.check(); err != nil {
		return buf, true, err
	}
	return append(buf, '}'), true, nil
}
