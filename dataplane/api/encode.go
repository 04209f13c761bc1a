package api

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Usage is what the engine reported for a finished request.
type Usage struct {
	Prompt, Completion, Cached uint32
}

// Finish is why generation ended.
type Finish uint8

const (
	// FinishStop: an end-of-sequence token, a stop token or a stop string.
	FinishStop Finish = iota
	// FinishLength: max_tokens or the model's length.
	FinishLength
	// FinishAbort: the engine aborted or cancelled the request.
	FinishAbort
)

// String is OpenAI's finish_reason for f.
func (f Finish) String() string {
	switch f {
	case FinishLength:
		return "length"
	case FinishAbort:
		return "abort"
	}
	return "stop"
}

// End is how a response ended.
type End struct {
	Finish Finish
	Usage  Usage
	// StopSequence is the stop string that ended generation, if one did.
	StopSequence string
}

// Encoder renders one response of an API, streamed or whole. It returns
// bytes and writes nothing: the caller sends the HTTP head (status,
// Content-Type) and appends what each call returns to the response.
type Encoder interface {
	// Streaming reports whether the response is an event stream.
	Streaming() bool
	// Open appends the events that open a stream; a whole response has none.
	Open(dst []byte) []byte
	// Delta appends the events carrying a piece of output (text,
	// reasoning, part of a tool call); a whole response keeps it for Close
	// and appends nothing.
	Delta(dst []byte, p Piece) []byte
	// Close appends the end of the response: a stream's closing events, or
	// a whole response's JSON body. A response that called tools and
	// stopped ends with finish_reason tool_calls (stop_reason tool_use).
	Close(dst []byte, e End) []byte
	// StreamError appends the events that end an open stream with e.
	StreamError(dst []byte, e *Error) []byte
}

// The streamed events' per-token path appends its JSON by hand (no
// reflection, no maps, nothing allocated); the once-per-response events
// use encoding/json. The strings are escaped as encoding/json does
// (HTML-safe, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped), so a
// stream's bytes do not depend on which path wrote them.

const hexDigits = "0123456789abcdef"

// jsonPlain marks the ASCII bytes a JSON string holds as they are: not a
// control, a quote, a backslash or one of the HTML characters encoding/json
// escapes. One load a byte instead of six comparisons.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONFloat appends a logprob as encoding/json writes a float64.
func appendJSONFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' { // clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
