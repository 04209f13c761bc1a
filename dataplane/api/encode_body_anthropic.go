package api

import (
	"encoding/json"
	"strconv"
)

// A whole (non-streamed) Anthropic Messages body is written by hand, as
// the OpenAI one is (encode_body_openai.go): keys sorted, as json.Marshal
// wrote the maps the encoder once built (encode_body_anthropic_test.go
// keeps them as the reference).

// anthropicBlock is one content block of a whole response as gathered:
// its kind, a tool call's name, and its text (the text, the thinking or
// the call's arguments) as o.text[start:end].
type anthropicBlock struct {
	kind       PieceKind
	name       string
	start, end int
}

// appendBody appends the whole response's JSON body.
func (o *AnthropicEncoder) appendBody(dst []byte, e End) []byte {
	dst = append(dst, `{"content":[`...)
	tools := 0
	for i, b := range o.blocks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = o.appendBlock(dst, b, &tools)
	}
	if len(o.blocks) == 0 {
		dst = append(dst, `{"text":"","type":"text"}`...)
	}
	dst = append(dst, `],"id":`...)
	dst = appendJSONString(dst, o.ID)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, o.Model)
	dst = append(dst, `,"role":"assistant","stop_reason":"`...)
	dst = append(dst, o.stopReason(e)...)
	dst = append(dst, `","stop_sequence":`...)
	if e.StopSequence == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, e.StopSequence)
	}
	dst = append(dst, `,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(e.Usage.Cached), 10)
	dst = append(dst, `,"input_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(e.Usage.Prompt), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(e.Usage.Completion), 10)
	return append(dst, "}}"...)
}

// appendBlock appends one content block; *tools counts the tool_use
// blocks written so far, whose ids number them.
func (o *AnthropicEncoder) appendBlock(dst []byte, b anthropicBlock, tools *int) []byte {
	text := bytesString(o.text[b.start:b.end])
	switch {
	case b.kind == PieceReasoning:
		dst = append(dst, `{"signature":"","thinking":`...)
		dst = appendJSONString(dst, text)
		return append(dst, `,"type":"thinking"}`...)
	case b.kind == PieceToolCall && json.Valid(o.text[b.start:b.end]):
		dst = append(dst, `{"id":"toolu_`...)
		dst = appendCallIDTail(dst, o.ID, *tools)
		*tools++
		dst = append(dst, `,"input":`...)
		dst = appendCompactJSON(dst, text)
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, b.name)
		return append(dst, `,"type":"tool_use"}`...)
	}
	// Text, and arguments that are not JSON (parsers never give these):
	// a text block.
	dst = append(dst, `{"text":`...)
	dst = appendJSONString(dst, text)
	return append(dst, `,"type":"text"}`...)
}

// appendCompactJSON appends s, which must be valid JSON, as json.Marshal
// writes a json.RawMessage: whitespace between tokens dropped, and <, >,
// & and U+2028, U+2029 escaped (they can only be inside strings).
func appendCompactJSON(dst []byte, s string) []byte {
	start, inString, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			start = i + 1
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xf])
			i += 2
			start = i + 1
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, s[start:i]...)
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}
