package api

import "encoding/binary"

// The request decoders read the common body, a JSON object of plain keys
// and scalar values, without encoding/json's reflection: jsonWalker cuts
// the object into keys and raw values, and each body's field method
// (decode_fields.go, decode_anthropic.go) stores them with the readers of
// decode_values.go as encoding/json would (a key given twice too: the
// last wins, maps and structs merge). Anything the walker or a field
// method does not take as plain (a syntax error, a value of the wrong
// type, a key with escapes or non-ASCII letters, a key that matches a
// field only case-insensitively) makes the decoder start again with
// encoding/json, whose result and error messages are then the answer.
// The fast path therefore never decides an error; it only accepts what
// encoding/json accepts, the same way (decode_test.go holds the two to
// the same result on a corpus and under fuzzing). Chat messages are read
// the same way (decode_messages.go).

// maxFastDepth is the deepest nesting the walker follows; deeper values
// go to encoding/json (whose limit is higher).
const maxFastDepth = 256

func (w *jsonWalker) space() {
	for w.i < len(w.b) && isSpace(w.b[w.i]) {
		w.i++
	}
}

// jsonWalker reads the members of the object at its place (a body, with
// white space around it allowed, or a message in a list): each next gives
// one, key unquoted and value raw, until it returns false; then ended
// tells the object's end from an object that is not plain (not an
// object, a syntax error, a key with escapes or non-ASCII bytes).
type jsonWalker struct {
	b        []byte
	i        int
	key, val []byte
	started  bool
	end      bool
}

// next reads the next member into key and val.
func (w *jsonWalker) next() bool { return w.nextKey() && w.takeValue() }

// nextKey reads the next member's key, leaving the walker at its value.
func (w *jsonWalker) nextKey() bool {
	w.space()
	if !w.started {
		w.started = true
		if w.i >= len(w.b) || w.b[w.i] != '{' {
			return false
		}
		w.i++
		w.space()
		if w.i < len(w.b) && w.b[w.i] == '}' {
			w.i++
			w.end = true
			return false
		}
	} else {
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case '}':
			w.i++
			w.end = true
			return false
		case ',':
			w.i++
			w.space()
		default:
			return false
		}
	}
	key, ok := w.plainKey()
	if !ok {
		return false
	}
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != ':' {
		return false
	}
	w.i++
	w.space()
	w.key = key
	return true
}

// takeValue reads the value at the walker's place into val.
func (w *jsonWalker) takeValue() bool {
	start := w.i
	if !w.value() {
		return false
	}
	w.val = w.b[start:w.i]
	return true
}

// ended reports whether the walk ended at the object's close.
func (w *jsonWalker) ended() bool { return w.end }

// atEnd reports whether only white space is left.
func (w *jsonWalker) atEnd() bool {
	w.space()
	return w.i == len(w.b)
}

// plainKey reads a key of printable ASCII without escapes.
func (w *jsonWalker) plainKey() ([]byte, bool) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return nil, false
	}
	start := w.i + 1
	for j := start; j < len(w.b); j++ {
		switch c := w.b[j]; {
		case c == '"':
			w.i = j + 1
			return w.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// value skips one JSON value, checking its syntax; false on any error or
// past maxFastDepth.
func (w *jsonWalker) value() bool {
	var stack [maxFastDepth]byte // the open containers
	depth := 0
	for {
		w.space()
		if w.i >= len(w.b) {
			return false
		}
		switch c := w.b[w.i]; {
		case c == '{' || c == '[':
			if depth == maxFastDepth {
				return false
			}
			stack[depth] = c
			depth++
			w.i++
			w.space()
			if w.i < len(w.b) && w.b[w.i] == c+2 { // '}' is '{'+2, ']' is '['+2
				w.i++
				depth--
				break
			}
			if c == '{' && !w.memberKey() {
				return false
			}
			continue
		case c == '"':
			if !w.str() {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if !w.number() {
				return false
			}
		case c == 't':
			if !w.literal("true") {
				return false
			}
		case c == 'f':
			if !w.literal("false") {
				return false
			}
		case c == 'n':
			if !w.literal("null") {
				return false
			}
		default:
			return false
		}
		// After a value: close containers, or go on to the next element.
		for {
			if depth == 0 {
				return true
			}
			w.space()
			if w.i >= len(w.b) {
				return false
			}
			c := w.b[w.i]
			w.i++
			if c == stack[depth-1]+2 {
				depth--
				continue
			}
			if c != ',' {
				return false
			}
			if stack[depth-1] == '{' && !w.memberKey() {
				return false
			}
			break
		}
	}
}

// memberKey reads an object member's key and its colon.
func (w *jsonWalker) memberKey() bool {
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != '"' || !w.str() {
		return false
	}
	w.space()
	if w.i >= len(w.b) || w.b[w.i] != ':' {
		return false
	}
	w.i++
	return true
}

// str skips a string, checking its escapes (its bytes may be any UTF-8
// or not: encoding/json replaces bad bytes rather than refusing them).
func (w *jsonWalker) str() bool {
	for j := w.i + 1; j < len(w.b); j++ {
		for j+8 <= len(w.b) && !strSpecial8(binary.LittleEndian.Uint64(w.b[j:])) {
			j += 8 // eight bytes with no quote, backslash or control character
		}
		if j >= len(w.b) {
			break
		}
		switch c := w.b[j]; {
		case c == '"':
			w.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j++; j >= len(w.b) {
				return false
			}
			switch w.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(w.b) || !isHex(w.b[j+1]) || !isHex(w.b[j+2]) || !isHex(w.b[j+3]) || !isHex(w.b[j+4]) {
					return false
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

// strSpecial8 reports whether any of the eight bytes in x is a quote, a
// backslash or below 0x20 (each test exact for "any": a byte is zero in
// x^c, or below n, where the subtraction borrows from its top bit).
func strSpecial8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	zero := func(y uint64) uint64 { return (y - ones) &^ y & tops }
	return zero(x^(ones*'"'))|zero(x^(ones*'\\'))|((x-ones*0x20)&^x&tops) != 0
}

// number skips a number of JSON's grammar: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func (w *jsonWalker) number() bool {
	b, i := w.b, w.i
	if b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	w.i = i
	return true
}

func (w *jsonWalker) literal(word string) bool {
	if len(w.b)-w.i < len(word) || string(w.b[w.i:w.i+len(word)]) != word {
		return false
	}
	w.i += len(word)
	return true
}
