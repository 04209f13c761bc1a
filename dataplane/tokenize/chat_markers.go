package tokenize

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Markers: what keeps message contents from steering a template.
//
// A template can branch on what a message says: Qwen3's strips the
// reasoning from an assistant turn that holds "</think>" and renders it
// back only after the last user message that is not a tool response, a
// user message whose text starts "<tool_response>" and ends
// "</tool_response>". Such a test changes how earlier turns render when a
// later message arrives, which the probes, with their few contents, cannot
// see. The tests compare contents with string literals of the template
// (`'</think>' in content`, `content.startswith('<tool_response>')`), and
// a content that holds none of those literals gives the same answer to
// every such test. So the incremental path takes only conversations whose
// contents hold none of the template's markup literals (those with a
// '<', '>', '[', ']' or '|' in them, which is how templates spell their
// markers), trimmed of surrounding whitespace: a content holding a literal
// holds its trimmed form too, so skipping more never lets one through.

// markupChars are the characters that make a literal markup.
const markupChars = "<>[]|"

// markerSet is a template's markers, and a markup character of each (a
// content with none of these characters holds no marker).
type markerSet struct {
	list  [][]byte
	chars []byte
}

// templateMarkers returns the markup literals of a template's source: its
// quoted strings inside {{ }} and {% %}, unescaped, trimmed, without
// duplicates.
func templateMarkers(source string) markerSet {
	var out markerSet
	seen := map[string]bool{}
	for i := 0; i+1 < len(source); i++ {
		if source[i] != '{' || (source[i+1] != '{' && source[i+1] != '%') {
			continue
		}
		closer := "}}"
		if source[i+1] == '%' {
			closer = "%}"
		}
		i += 2
		for i < len(source) && !strings.HasPrefix(source[i:], closer) {
			if q := source[i]; q == '\'' || q == '"' {
				lit, end := jinjaString(source, i)
				if m := strings.TrimSpace(lit); strings.ContainsAny(m, markupChars) && !seen[m] {
					seen[m] = true
					out.list = append(out.list, []byte(m))
					if c := m[strings.IndexAny(m, markupChars)]; bytes.IndexByte(out.chars, c) < 0 {
						out.chars = append(out.chars, c)
					}
				}
				i = end
				continue
			}
			i++
		}
	}
	return out
}

// jinjaString reads the quoted string at source[at] and returns its text
// and the offset past its closing quote (the end of source if there is
// none).
func jinjaString(source string, at int) (string, int) {
	q := source[at]
	var b strings.Builder
	for i := at + 1; i < len(source); i++ {
		c := source[i]
		switch {
		case c == q:
			return b.String(), i + 1
		case c == '\\' && i+1 < len(source):
			i++
			switch e := source[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), len(source)
}

// cleanContent reports whether a message content, the JSON string body
// between its quotes, holds none of markers. Only a \u escape can spell a
// markup character, so a body with other escapes and none of the markers'
// characters is clean as it is; the others are unescaped first.
func cleanContent(body []byte, escaped bool, markers *markerSet) bool {
	if len(markers.list) == 0 {
		return true
	}
	if !markers.anyChar(body) && (!escaped || !bytes.Contains(body, []byte(`\u`))) {
		return true
	}
	if escaped {
		var ok bool
		if body, ok = unescapeJSON(make([]byte, 0, len(body)), body); !ok {
			return false
		}
	}
	for _, m := range markers.list {
		if bytes.Contains(body, m) {
			return false
		}
	}
	return true
}

// anyChar reports whether b holds one of the markers' characters.
func (m *markerSet) anyChar(b []byte) bool {
	for _, c := range m.chars {
		if bytes.IndexByte(b, c) >= 0 {
			return true
		}
	}
	return false
}

// unescapeJSON appends the text of a JSON string body to dst; ok is false
// when an escape is malformed.
func unescapeJSON(dst, body []byte) ([]byte, bool) {
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i++; i >= len(body) {
			return dst, false
		}
		switch body[i] {
		case '"', '\\', '/':
			dst = append(dst, body[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n := hex4(body[i+1:])
			if n == 0 {
				return dst, false
			}
			i += n
			if utf16.IsSurrogate(r) {
				if r2, n2 := hex4(body[min(i+3, len(body)):]); n2 > 0 && i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r, i = d, i+2+n2
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
	}
	return dst, true
}

// hex4 reads the four hex digits b starts with: the rune and 4, or 0, 0.
func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, 0
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, 0
		}
	}
	return r, 4
}
