package api

import (
	"slices"
	"strconv"
)

// OpenAIEncoder encodes Completions and Chat Completions responses and
// their server-sent event streams. A chat's reasoning goes out as
// reasoning_content, its tool calls as tool_calls (streamed: the first
// delta of a call has its index, id, type and name, the next ones
// fragments of its arguments).
type OpenAIEncoder struct {
	ID, Model string
	Created   int64
	// Chat selects chat.completion(.chunk) over text_completion.
	Chat, Stream bool
	// IncludeUsage adds the usage chunk at the end of a stream
	// (stream_options.include_usage).
	IncludeUsage bool
	// Logprobs returns each choice's logprobs (given with AddLogprobs)
	// instead of null.
	Logprobs bool
	// Echo (completions) is the prompt, sent before the output.
	Echo string
	// Index is the choice's index; Part makes it one of several choices
	// (n > 1) whose stream's end (usage, [DONE]) EndStream writes once.
	Index      int
	Part       bool
	all        Collect
	calls      int
	pending    []TokenLogprob
	textOffset int
	tail       []byte // a chunk's fields after its choices (chunkTail)
	order      []TopLogprob
}

func (o *OpenAIEncoder) object() string {
	switch {
	case o.Chat && o.Stream:
		return "chat.completion.chunk"
	case o.Chat:
		return "chat.completion"
	}
	return "text_completion"
}

// Streaming implements Encoder.
func (o *OpenAIEncoder) Streaming() bool { return o.Stream }

// Reset makes o the encoder c (given by its exported fields) for another
// response, keeping the room o's whole body's text and reasoning took, up
// to 64 KB each: a pooled encoder then collects a body without allocating.
func (o *OpenAIEncoder) Reset(c OpenAIEncoder) {
	text, reasoning := keptRoom(o.all.Text), keptRoom(o.all.Reasoning)
	*o = c
	o.all = Collect{Text: text, Reasoning: reasoning}
}

// Clone is a copy of o that shares none of its buffers, for an encoder
// run beside o (a choice of several, each on its own goroutine): a plain
// copy of a Reset encoder would append to the same kept room.
func (o *OpenAIEncoder) Clone() *OpenAIEncoder {
	c := *o
	c.all = Collect{Text: slices.Clone(o.all.Text), Reasoning: slices.Clone(o.all.Reasoning), Calls: slices.Clone(o.all.Calls)}
	c.pending, c.tail, c.order = slices.Clone(o.pending), slices.Clone(o.tail), slices.Clone(o.order)
	return &c
}

// keptRoom is b emptied for reuse, or nil when it is too large to keep.
func keptRoom(b []byte) []byte {
	if cap(b) > 64<<10 {
		return nil
	}
	return b[:0]
}

// Open implements Encoder: a chat stream starts with the assistant role.
func (o *OpenAIEncoder) Open(dst []byte) []byte {
	if o.Stream && !o.Chat && o.Echo != "" {
		o.textOffset = len(o.Echo)
		return o.chunk(dst, Piece{Text: o.Echo}, "")
	}
	if !o.Stream || !o.Chat {
		return dst
	}
	dst = append(dst, `data: {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":`...)
	dst = strconv.AppendInt(dst, int64(o.Index), 10)
	dst = append(dst, `,"logprobs":null}`...)
	return o.chunkTail(dst)
}

// callID is the id of the request's i-th tool call.
func (o *OpenAIEncoder) callID(i int) string { return "call_" + o.ID + "_" + strconv.Itoa(i) }

// The chunks of a stream are written by hand, their keys in the order
// encoding/json gives a map's (sorted), so they are the bytes json.Marshal
// of the same maps would be.

// chunkTail ends a chunk's choices and appends the fields that follow
// (the same for every chunk of the response, rendered once).
func (o *OpenAIEncoder) chunkTail(dst []byte) []byte {
	if o.tail == nil {
		t := append([]byte(nil), `],"created":`...)
		t = strconv.AppendInt(t, o.Created, 10)
		t = append(t, `,"id":`...)
		t = appendJSONString(t, o.ID)
		t = append(t, `,"model":`...)
		t = appendJSONString(t, o.Model)
		t = append(t, `,"object":"`...)
		o.tail = append(append(t, o.object()...), '"')
	}
	dst = append(dst, o.tail...)
	return append(dst, "}\n\n"...)
}

// chunk appends one stream chunk carrying p, its pending logprobs and
// finish ("" while the stream goes on: null).
func (o *OpenAIEncoder) chunk(dst []byte, p Piece, finish string) []byte {
	dst = append(dst, `data: {"choices":[{`...)
	if o.Chat {
		dst = append(dst, `"delta":`...)
		dst = o.appendDelta(dst, p)
		dst = append(dst, ',')
	}
	dst = append(dst, `"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, finish)
	}
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, int64(o.Index), 10)
	dst = append(dst, `,"logprobs":`...)
	dst = o.appendLogprobs(dst)
	if !o.Chat {
		dst = append(dst, `,"text":`...)
		dst = appendJSONString(dst, p.Text)
	}
	dst = append(dst, '}')
	return o.chunkTail(dst)
}

// appendDelta appends a chat chunk's delta object for p.
func (o *OpenAIEncoder) appendDelta(dst []byte, p Piece) []byte {
	switch {
	case p.Kind == PieceReasoning:
		dst = append(dst, `{"reasoning_content":`...)
		dst = appendJSONString(dst, p.Text)
	case p.Kind == PieceToolCall:
		dst = append(dst, `{"tool_calls":[{"function":{"arguments":`...)
		dst = appendJSONString(dst, p.Text)
		if p.Name != "" {
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, p.Name)
			dst = append(dst, `},"id":`...)
			dst = appendJSONString(dst, o.callID(p.Index)) // once a call, not once a token
		} else {
			dst = append(dst, '}')
		}
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendInt(dst, int64(p.Index), 10)
		if p.Name != "" {
			dst = append(dst, `,"type":"function"`...)
		}
		dst = append(dst, "}]"...)
	case p.Text != "":
		dst = append(dst, `{"content":`...)
		dst = appendJSONString(dst, p.Text)
	default:
		dst = append(dst, '{')
	}
	return append(dst, '}')
}

// sseData appends one "data:" event.
func sseData(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}

// Delta implements Encoder.
func (o *OpenAIEncoder) Delta(dst []byte, p Piece) []byte {
	if p.Kind == PieceToolCall && p.Name != "" {
		o.calls++
	}
	if !o.Stream {
		o.all.Add(p)
		return dst
	}
	return o.chunk(dst, p, "")
}

func openAIUsage(u Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion,
		"total_tokens": u.Prompt + u.Completion, "prompt_tokens_details": map[string]any{"cached_tokens": u.Cached}}
}

// finishReason is OpenAI's finish_reason: tool_calls for a chat that
// called tools and stopped.
func (o *OpenAIEncoder) finishReason(f Finish) string {
	if f == FinishStop && o.calls > 0 {
		return "tool_calls"
	}
	return f.String()
}

// Close implements Encoder.
func (o *OpenAIEncoder) Close(dst []byte, e End) []byte {
	reason := o.finishReason(e.Finish)
	if !o.Stream {
		o.textOffset = len(o.Echo)
		return o.appendBody(dst, reason, e)
	}
	dst = o.chunk(dst, Piece{}, reason)
	if o.Part {
		return dst
	}
	return o.EndStream(dst, e.Usage)
}

// EndStream appends a stream's end: the usage chunk when asked for, then
// [DONE]. Close calls it, except for a Part, whose caller does once all
// choices are done.
func (o *OpenAIEncoder) EndStream(dst []byte, u Usage) []byte {
	if o.IncludeUsage {
		dst = append(dst, `data: {"choices":[`...)
		dst = o.chunkTail(dst)
		dst = dst[:len(dst)-3] // the tail's "}\n\n": usage follows object
		dst = append(dst, `,"usage":{"completion_tokens":`...)
		dst = strconv.AppendUint(dst, uint64(u.Completion), 10)
		dst = append(dst, `,"prompt_tokens":`...)
		dst = strconv.AppendUint(dst, uint64(u.Prompt), 10)
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendUint(dst, uint64(u.Cached), 10)
		dst = append(dst, `},"total_tokens":`...)
		dst = strconv.AppendUint(dst, uint64(u.Prompt)+uint64(u.Completion), 10)
		dst = append(dst, "}}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// StreamError implements Encoder: the error body as an event, then [DONE].
func (o *OpenAIEncoder) StreamError(dst []byte, e *Error) []byte {
	dst = sseData(dst, e.Body(OpenAI))
	return append(dst, "data: [DONE]\n\n"...)
}
