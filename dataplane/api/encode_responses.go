package api

import "strconv"

// ResponsesEncoder encodes OpenAI Responses API answers and their typed
// event stream: response.created and response.in_progress, then per
// output item (reasoning, message, function_call) output_item.added, its
// deltas (reasoning_text, output_text, function_call_arguments) and their
// done events, output_item.done, and response.completed. A new item
// begins where the kind of output changes, as the Anthropic encoder's
// blocks do.
type ResponsesEncoder struct {
	ID, Model string
	Created   int64
	Stream    bool
	// PromptTokens goes into the stream's opening events.
	PromptTokens uint32
	items        []map[string]any // a stream's items
	whole        []responsesItem  // a whole response's items
	kind         PieceKind
	inItem       bool
	text         []byte // a stream's open item's text or arguments; a whole response's items' texts, one after another
	seq          int
	calls        int
}

// Streaming implements Encoder.
func (o *ResponsesEncoder) Streaming() bool { return o.Stream }

func (o *ResponsesEncoder) event(dst []byte, kind string, data map[string]any) []byte {
	data["type"], data["sequence_number"] = kind, o.seq
	o.seq++
	return sseEvent(dst, kind, data)
}

func (o *ResponsesEncoder) response(status string, e *End) map[string]any {
	output := make([]any, len(o.items))
	for i, it := range o.items {
		output[i] = it
	}
	r := map[string]any{"id": o.ID, "object": "response", "created_at": o.Created, "model": o.Model, "status": status,
		"output": output, "error": nil, "incomplete_details": nil, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}}
	u := Usage{Prompt: o.PromptTokens}
	if e != nil {
		u = e.Usage
		if e.Finish == FinishLength {
			r["status"], r["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
		}
	}
	r["usage"] = map[string]any{"input_tokens": u.Prompt, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.Prompt + u.Completion}
	return r
}

// Open implements Encoder.
//
// Items and their parts open and close with the events the official SDK's
// accumulator expects (openai-node's response-accumulator: a reasoning
// item's reasoning_text is a content part, announced before its deltas).
func (o *ResponsesEncoder) Open(dst []byte) []byte {
	if !o.Stream {
		return dst
	}
	dst = o.event(dst, "response.created", map[string]any{"response": o.response("in_progress", nil)})
	return o.event(dst, "response.in_progress", map[string]any{"response": o.response("in_progress", nil)})
}

// item is the last item as it stands (status in_progress or completed).
func (o *ResponsesEncoder) item(status string, p Piece) map[string]any {
	n := strconv.Itoa(len(o.items) - 1)
	switch o.kind {
	case PieceReasoning:
		content := []any{}
		if status == "completed" {
			content = []any{map[string]any{"type": "reasoning_text", "text": string(o.text)}}
		}
		return map[string]any{"type": "reasoning", "id": "rs_" + o.ID + "_" + n, "summary": []any{}, "content": content}
	case PieceToolCall:
		return map[string]any{"type": "function_call", "id": "fc_" + o.ID + "_" + n, "call_id": "call_" + o.ID + "_" + strconv.Itoa(p.Index),
			"name": p.Name, "arguments": string(o.text), "status": status}
	}
	content := []any{}
	if status == "completed" {
		content = []any{map[string]any{"type": "output_text", "text": string(o.text), "annotations": []any{}}}
	}
	return map[string]any{"type": "message", "id": "msg_" + o.ID + "_" + n, "status": status, "role": "assistant", "content": content}
}

// Delta implements Encoder.
func (o *ResponsesEncoder) Delta(dst []byte, p Piece) []byte {
	if !o.Stream {
		o.addItem(p)
		return dst
	}
	if !o.inItem || p.Kind != o.kind || p.Name != "" {
		dst = o.closeItem(dst)
		o.inItem, o.kind, o.text = true, p.Kind, o.text[:0]
		o.items = append(o.items, nil)
		if p.Kind == PieceToolCall {
			o.calls++
		}
		o.items[len(o.items)-1] = o.item("in_progress", p)
		dst = o.openEvents(dst)
	}
	o.text = append(o.text, p.Text...)
	if p.Text == "" {
		return dst
	}
	idx := len(o.items) - 1
	id, _ := o.items[idx]["id"].(string)
	kind := "response.output_text.delta"
	switch p.Kind {
	case PieceReasoning:
		kind = "response.reasoning_text.delta"
	case PieceToolCall:
		kind = "response.function_call_arguments.delta"
	}
	// Keys sorted, as encoding/json writes the event's map.
	dst = append(dst, "event: "...)
	dst = append(dst, kind...)
	dst = append(dst, "\ndata: {"...)
	if p.Kind != PieceToolCall {
		dst = append(dst, `"content_index":0,`...)
	}
	dst = append(dst, `"delta":`...)
	dst = appendJSONString(dst, p.Text)
	dst = append(dst, `,"item_id":`...)
	dst = appendJSONString(dst, id)
	if p.Kind == PieceText {
		dst = append(dst, `,"logprobs":[]`...)
	}
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(o.seq), 10)
	o.seq++
	dst = append(dst, `,"type":"`...)
	dst = append(dst, kind...)
	return append(dst, "\"}\n\n"...)
}

// openEvents announce a new item (and a message's text part).
func (o *ResponsesEncoder) openEvents(dst []byte) []byte {
	idx := len(o.items) - 1
	dst = o.event(dst, "response.output_item.added", map[string]any{"output_index": idx, "item": o.items[idx]})
	switch o.kind {
	case PieceText:
		dst = o.event(dst, "response.content_part.added", map[string]any{"item_id": o.items[idx]["id"], "output_index": idx,
			"content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	case PieceReasoning:
		dst = o.event(dst, "response.content_part.added", map[string]any{"item_id": o.items[idx]["id"], "output_index": idx,
			"content_index": 0, "part": map[string]any{"type": "reasoning_text", "text": ""}})
	}
	return dst
}

// closeItem completes the open item (and, streaming, says so).
func (o *ResponsesEncoder) closeItem(dst []byte) []byte {
	if !o.inItem {
		return dst
	}
	o.inItem = false
	idx := len(o.items) - 1
	open := o.items[idx]
	name, _ := open["name"].(string)
	done := o.item("completed", Piece{Name: name, Index: o.calls - 1})
	done["id"] = open["id"]
	o.items[idx] = done
	id := done["id"]
	switch o.kind {
	case PieceReasoning:
		dst = o.event(dst, "response.reasoning_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": string(o.text)})
		dst = o.event(dst, "response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "reasoning_text", "text": string(o.text)}})
	case PieceToolCall:
		dst = o.event(dst, "response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": string(o.text)})
	default:
		part := map[string]any{"type": "output_text", "text": string(o.text), "annotations": []any{}}
		dst = o.event(dst, "response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": string(o.text), "logprobs": []any{}})
		dst = o.event(dst, "response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
	}
	return o.event(dst, "response.output_item.done", map[string]any{"output_index": idx, "item": done})
}

// Close implements Encoder.
func (o *ResponsesEncoder) Close(dst []byte, e End) []byte {
	if !o.Stream {
		if len(o.whole) == 0 {
			o.addItem(Piece{Kind: PieceText})
		}
		o.inItem = false
		return o.appendBody(dst, e)
	}
	if len(o.items) == 0 {
		dst = o.Delta(dst, Piece{Kind: PieceText})
	}
	dst = o.closeItem(dst)
	status := "completed"
	if e.Finish == FinishLength {
		status = "incomplete"
	}
	kind := "response.completed"
	if status == "incomplete" {
		kind = "response.incomplete"
	}
	return o.event(dst, kind, map[string]any{"response": o.response(status, &e)})
}

// StreamError implements Encoder: an error event.
func (o *ResponsesEncoder) StreamError(dst []byte, e *Error) []byte {
	return o.event(dst, "error", map[string]any{"code": nil, "message": e.Message, "param": nil})
}
