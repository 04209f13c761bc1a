package api

import "strconv"

// A whole (non-streamed) Responses answer is written by hand, as the
// OpenAI body is (encode_body_openai.go): keys sorted, as json.Marshal
// wrote the maps the encoder once built (encode_body_responses_test.go
// keeps them as the reference).

// responsesItem is one output item of a whole response as gathered: its
// kind, a function call's name and its number among the calls, and its
// text (the text, the reasoning or the arguments) as o.text[start:end].
type responsesItem struct {
	kind       PieceKind
	name       string
	call       int
	start, end int
}

// addItem gathers a whole response's items in order: a piece of another
// kind, or a tool call's first piece, begins an item.
func (o *ResponsesEncoder) addItem(p Piece) {
	if !o.inItem || p.Kind != o.kind || p.Name != "" {
		o.inItem, o.kind = true, p.Kind
		o.whole = append(o.whole, responsesItem{kind: p.Kind, name: p.Name, call: o.calls, start: len(o.text)})
		if p.Kind == PieceToolCall {
			o.calls++
		}
	}
	o.text = append(o.text, p.Text...)
	o.whole[len(o.whole)-1].end = len(o.text)
}

// appendBody appends the whole response's JSON body.
func (o *ResponsesEncoder) appendBody(dst []byte, e End) []byte {
	dst = append(dst, `{"created_at":`...)
	dst = strconv.AppendInt(dst, o.Created, 10)
	dst = append(dst, `,"error":null,"id":`...)
	dst = appendJSONString(dst, o.ID)
	status := `"completed"`
	if e.Finish == FinishLength {
		status = `"incomplete"`
		dst = append(dst, `,"incomplete_details":{"reason":"max_output_tokens"}`...)
	} else {
		dst = append(dst, `,"incomplete_details":null`...)
	}
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, o.Model)
	dst = append(dst, `,"object":"response","output":[`...)
	for i, it := range o.whole {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = o.appendItem(dst, it, i)
	}
	dst = append(dst, `],"parallel_tool_calls":true,"status":`...)
	dst = append(dst, status...)
	dst = append(dst, `,"tool_choice":"auto","tools":[],"usage":{"input_tokens":`...)
	u := e.Usage
	dst = strconv.AppendUint(dst, uint64(u.Prompt), 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Cached), 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Completion), 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	dst = strconv.AppendUint(dst, uint64(u.Prompt+u.Completion), 10)
	return append(dst, "}}"...)
}

// appendItem appends the n-th output item, completed.
func (o *ResponsesEncoder) appendItem(dst []byte, it responsesItem, n int) []byte {
	text := bytesString(o.text[it.start:it.end])
	switch it.kind {
	case PieceReasoning:
		dst = append(dst, `{"content":[{"text":`...)
		dst = appendJSONString(dst, text)
		dst = append(dst, `,"type":"reasoning_text"}],"id":"rs_`...)
		dst = appendCallIDTail(dst, o.ID, n)
		return append(dst, `,"summary":[],"type":"reasoning"}`...)
	case PieceToolCall:
		dst = append(dst, `{"arguments":`...)
		dst = appendJSONString(dst, text)
		dst = append(dst, `,"call_id":"call_`...)
		dst = appendCallIDTail(dst, o.ID, it.call)
		dst = append(dst, `,"id":"fc_`...)
		dst = appendCallIDTail(dst, o.ID, n)
		dst = append(dst, `,"name":`...)
		dst = appendJSONString(dst, it.name)
		return append(dst, `,"status":"completed","type":"function_call"}`...)
	}
	dst = append(dst, `{"content":[{"annotations":[],"text":`...)
	dst = appendJSONString(dst, text)
	dst = append(dst, `,"type":"output_text"}],"id":"msg_`...)
	dst = appendCallIDTail(dst, o.ID, n)
	return append(dst, `,"role":"assistant","status":"completed","type":"message"}`...)
}
