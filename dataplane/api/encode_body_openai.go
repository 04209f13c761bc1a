package api

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// A whole (non-streamed) OpenAI body is written by hand as the stream's
// chunks are: keys in the order encoding/json gives a map's (sorted), so
// it is the bytes json.Marshal of the maps the encoder once built would
// be (encode_body_test.go keeps that builder as the reference).

// bytesString is b as a string, without a copy, for the escaper to read
// (it keeps nothing).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendBody appends the whole response's JSON body.
func (o *OpenAIEncoder) appendBody(dst []byte, reason string, e End) []byte {
	dst = append(dst, `{"choices":[{"finish_reason":`...)
	dst = appendJSONString(dst, reason)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(o.Index), 10)
	dst = append(dst, `,"logprobs":`...)
	dst = o.appendLogprobs(dst)
	if o.Chat {
		dst = append(dst, `,"message":`...)
		dst = o.appendMessage(dst)
	}
	if e.StopSequence != "" {
		dst = append(dst, `,"stop_reason":`...) // vLLM's field
		dst = appendJSONString(dst, e.StopSequence)
	}
	if !o.Chat {
		dst = append(dst, `,"text":`...)
		dst = o.appendText(dst)
	}
	dst = append(dst, `}],"created":`...)
	dst = strconv.AppendInt(dst, o.Created, 10)
	dst = append(dst, `,"id":`...)
	dst = appendJSONString(dst, o.ID)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, o.Model)
	dst = append(dst, `,"object":"`...)
	dst = append(dst, o.object()...)
	dst = append(dst, `","usage":`...)
	dst = appendOpenAIUsage(dst, e.Usage)
	return append(dst, '}')
}

// appendText appends a completion's text: the echo, then the output.
func (o *OpenAIEncoder) appendText(dst []byte) []byte {
	text := bytesString(o.all.Text)
	switch {
	case o.Echo == "":
		return appendJSONString(dst, text)
	case !utf8.ValidString(o.Echo):
		// Its last bytes may make a rune with the output's first ones:
		// escape the two as one string.
		return appendJSONString(dst, o.Echo+text)
	}
	// A valid echo ends on a rune's boundary: each escapes as it would
	// in the joined string.
	dst = append(dst, '"')
	dst = appendJSONInner(dst, o.Echo)
	dst = appendJSONInner(dst, text)
	return append(dst, '"')
}

// appendJSONInner appends s escaped as appendJSONString does, without
// its quotes.
func appendJSONInner(dst []byte, s string) []byte {
	n := len(dst)
	dst = appendJSONString(dst, s)
	return append(dst[:n], dst[n+1:len(dst)-1]...)
}

// appendMessage appends a chat response's message.
func (o *OpenAIEncoder) appendMessage(dst []byte) []byte {
	dst = append(dst, `{"content":`...)
	if len(o.all.Calls) > 0 && len(o.all.Text) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, bytesString(o.all.Text))
	}
	if len(o.all.Reasoning) > 0 {
		dst = append(dst, `,"reasoning_content":`...)
		dst = appendJSONString(dst, bytesString(o.all.Reasoning))
	}
	dst = append(dst, `,"role":"assistant"`...)
	if len(o.all.Calls) > 0 {
		dst = append(dst, `,"tool_calls":[`...)
		for i, c := range o.all.Calls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"function":{"arguments":`...)
			dst = appendJSONString(dst, c.Arguments)
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, c.Name)
			dst = append(dst, `},"id":"call_`...)
			dst = appendCallIDTail(dst, o.ID, i)
			dst = append(dst, `,"type":"function"}`...)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendCallIDTail appends the rest of callID(i) as a JSON string whose
// opening quote and "call_" are already written (the ASCII around the id
// does not change how it escapes).
func appendCallIDTail(dst []byte, id string, i int) []byte {
	dst = appendJSONInner(dst, id)
	dst = append(dst, '_')
	dst = strconv.AppendInt(dst, int64(i), 10)
	return append(dst, '"')
}

// appendOpenAIUsage appends openAIUsage(u) as JSON (its total a uint32
// sum, as the map's).
func appendOpenAIUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"completion_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Completion), 10)
	dst = append(dst, `,"prompt_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Prompt), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Cached), 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Prompt+u.Completion), 10)
	return append(dst, '}')
}
