package tokenize

import (
	"bytes"
	"encoding/json"
	"strings"
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

// templateMarkers returns the markup literals of a template's source: its
// quoted strings inside {{ }} and {% %}, unescaped, trimmed, without
// duplicates.
func templateMarkers(source string) [][]byte {
	var out [][]byte
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
					out = append(out, []byte(m))
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
// between its quotes, holds none of markers. A body with escapes is
// decoded first.
func cleanContent(body []byte, escaped bool, markers [][]byte) bool {
	if len(markers) == 0 {
		return true
	}
	if escaped {
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, body...), '"'), &s) != nil {
			return false
		}
		body = []byte(s)
	}
	if !bytes.ContainsAny(body, markupChars) {
		return true
	}
	for _, m := range markers {
		if bytes.Contains(body, m) {
			return false
		}
	}
	return true
}
