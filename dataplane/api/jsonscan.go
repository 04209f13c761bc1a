package api

// jsonScanner checks one JSON value's syntax as its bytes arrive, so a
// tool call's arguments can be streamed while they are known to be a
// valid prefix of JSON, and their end found without parsing them twice.
type jsonScanner struct {
	stack []byte // '{' or '[' per open container
	state scanState
	word  string // the rest of a literal (true, false, null)
	hex   int    // hex digits left in a \u escape
	key   bool   // the string being read is an object key
}

type scanState uint8

const (
	scanValue    scanState = iota // a value is expected
	scanObjFirst                  // after '{': a key or '}'
	scanObjKey                    // after ',' in an object: a key
	scanColon                     // after a key
	scanArrFirst                  // after '[': a value or ']'
	scanAfter                     // after a value: ',' or a close
	scanString
	scanEscape
	scanNumber
	scanLiteral
	scanDone
	scanBad
)

// maxScanDepth bounds nesting, as the template values do.
const maxScanDepth = 64

// feed scans b and returns how many bytes belong to the value: all of b
// while it is unfinished, fewer once it ended (done). bad reports bytes
// that no JSON value can have.
func (s *jsonScanner) feed(b string) (n int, done, bad bool) {
	for n = 0; n < len(b); n++ {
		if !s.step(b[n]) {
			break
		}
	}
	return n, s.state == scanDone, s.state == scanBad
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step takes one byte; false says the byte is not the value's (the value
// ended before it, or it is bad).
func (s *jsonScanner) step(c byte) bool {
	switch s.state {
	case scanDone, scanBad:
		return false
	case scanString:
		switch {
		case c == '"':
			s.state = scanAfter
			if s.key {
				s.state, s.key = scanColon, false
			}
		case c == '\\':
			s.state = scanEscape
		case c < 0x20:
			s.state = scanBad
			return false
		}
		return true
	case scanEscape:
		switch {
		case s.hex > 0:
			if !isHex(c) {
				s.state = scanBad
				return false
			}
			if s.hex--; s.hex == 0 {
				s.state = scanString
			}
		case c == 'u':
			s.hex = 4
		case c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't':
			s.state = scanString
		default:
			s.state = scanBad
			return false
		}
		return true
	case scanNumber:
		if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			return true
		}
		s.state = scanAfter
		return s.step(c)
	case scanLiteral:
		if c != s.word[0] {
			s.state = scanBad
			return false
		}
		if s.word = s.word[1:]; s.word == "" {
			s.state = scanAfter
			s.closeIfTop()
		}
		return true
	}
	if isSpace(c) && s.state != scanAfter {
		return true
	}
	return s.structural(c)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// closeIfTop ends the scan once the outermost value is complete.
func (s *jsonScanner) closeIfTop() {
	if len(s.stack) == 0 {
		s.state = scanDone
	}
}

// structural takes a byte outside strings, numbers and literals.
func (s *jsonScanner) structural(c byte) bool {
	switch s.state {
	case scanObjFirst, scanObjKey:
		if c == '}' && s.state == scanObjFirst {
			return s.pop('{')
		}
		if c != '"' {
			break
		}
		s.state, s.key = scanString, true
		return true
	case scanColon:
		if c != ':' {
			break
		}
		s.state = scanValue
		return true
	case scanArrFirst:
		if c == ']' {
			return s.pop('[')
		}
		s.state = scanValue
		return s.structural(c)
	case scanAfter:
		if len(s.stack) == 0 {
			s.state = scanDone
			return false
		}
		switch {
		case isSpace(c):
			return true
		case c == ',':
			s.state = scanValue
			if s.stack[len(s.stack)-1] == '{' {
				s.state = scanObjKey
			}
			return true
		case c == '}':
			return s.pop('{')
		case c == ']':
			return s.pop('[')
		}
	case scanValue:
		return s.value(c)
	}
	s.state = scanBad
	return false
}

func (s *jsonScanner) value(c byte) bool {
	switch {
	case c == '{' || c == '[':
		if len(s.stack) >= maxScanDepth {
			break
		}
		s.stack = append(s.stack, c)
		s.state = scanObjFirst
		if c == '[' {
			s.state = scanArrFirst
		}
		return true
	case c == '"':
		s.state = scanString
		return true
	case c == '-' || c >= '0' && c <= '9':
		s.state = scanNumber
		return true
	case c == 't':
		s.state, s.word = scanLiteral, "rue"
		return true
	case c == 'f':
		s.state, s.word = scanLiteral, "alse"
		return true
	case c == 'n':
		s.state, s.word = scanLiteral, "ull"
		return true
	}
	s.state = scanBad
	return false
}

// pop closes the innermost container, which must be open.
func (s *jsonScanner) pop(open byte) bool {
	if len(s.stack) == 0 || s.stack[len(s.stack)-1] != open {
		s.state = scanBad
		return false
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.state = scanAfter
	s.closeIfTop()
	return true
}
