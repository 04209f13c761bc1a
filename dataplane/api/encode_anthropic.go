package api

import (
	"encoding/json"
	"strconv"
)

// AnthropicEncoder encodes Messages responses and their event stream
// (message_start, ping, then per content block content_block_start,
// content_block_delta..., content_block_stop, and message_delta,
// message_stop; ping after the first block's start, where Anthropic's API
// sends it). Reasoning goes out as thinking blocks, tool calls as
// tool_use blocks (input_json_delta events when streamed), text as text
// blocks: a new block begins where the kind of output changes.
type AnthropicEncoder struct {
	ID, Model string
	Stream    bool
	// PromptTokens goes into message_start's usage, before the engine
	// reports it.
	PromptTokens uint32
	blocks       []anthropicBlock // a whole response's content
	text         []byte           // the whole response's blocks' texts, one after another
	open         int              // blocks started in a stream
	kind         PieceKind
	inBlock      bool
	calls        int
}

// Streaming implements Encoder.
func (o *AnthropicEncoder) Streaming() bool { return o.Stream }

func sseEvent(dst []byte, event string, data any) []byte {
	b, _ := json.Marshal(data)
	dst = append(dst, "event: "...)
	dst = append(dst, event...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, '\n', '\n')
}

func (o *AnthropicEncoder) message(content []any, stop, seq any, u Usage) map[string]any {
	return map[string]any{"id": o.ID, "type": "message", "role": "assistant", "model": o.Model, "content": content,
		"stop_reason": stop, "stop_sequence": seq,
		"usage": map[string]any{"input_tokens": u.Prompt, "output_tokens": u.Completion,
			"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0}}
}

// Open implements Encoder.
func (o *AnthropicEncoder) Open(dst []byte) []byte {
	if !o.Stream {
		return dst
	}
	return sseEvent(dst, "message_start", map[string]any{"type": "message_start",
		"message": o.message([]any{}, nil, nil, Usage{Prompt: o.PromptTokens})})
}

// toolID is the id of the response's i-th tool_use block.
func (o *AnthropicEncoder) toolID(i int) string { return "toolu_" + o.ID + "_" + strconv.Itoa(i) }

// startBlock closes the open block and starts one for p.
func (o *AnthropicEncoder) startBlock(dst []byte, p Piece) []byte {
	dst = o.stopBlock(dst)
	var block map[string]any
	switch p.Kind {
	case PieceReasoning:
		block = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
	case PieceToolCall:
		block = map[string]any{"type": "tool_use", "id": o.toolID(p.Index), "name": p.Name, "input": map[string]any{}}
	default:
		block = map[string]any{"type": "text", "text": ""}
	}
	o.inBlock, o.kind = true, p.Kind
	dst = sseEvent(dst, "content_block_start", map[string]any{"type": "content_block_start", "index": o.open, "content_block": block})
	if o.open++; o.open == 1 {
		dst = sseEvent(dst, "ping", map[string]any{"type": "ping"})
	}
	return dst
}

func (o *AnthropicEncoder) stopBlock(dst []byte) []byte {
	if !o.inBlock {
		return dst
	}
	o.inBlock = false
	return sseEvent(dst, "content_block_stop", map[string]any{"type": "content_block_stop", "index": o.open - 1})
}

// Delta implements Encoder.
func (o *AnthropicEncoder) Delta(dst []byte, p Piece) []byte {
	if p.Kind == PieceToolCall && p.Name != "" {
		o.calls++
	}
	if !o.Stream {
		o.addBlock(p)
		return dst
	}
	if !o.inBlock || p.Kind != o.kind || p.Name != "" {
		dst = o.startBlock(dst, p)
	}
	if p.Kind == PieceToolCall && p.Text == "" {
		return dst
	}
	dst = append(dst, "event: content_block_delta\ndata: {\"delta\":{"...)
	switch p.Kind {
	case PieceReasoning:
		dst = append(dst, `"thinking":`...)
		dst = appendJSONString(dst, p.Text)
		dst = append(dst, `,"type":"thinking_delta"`...)
	case PieceToolCall:
		dst = append(dst, `"partial_json":`...)
		dst = appendJSONString(dst, p.Text)
		dst = append(dst, `,"type":"input_json_delta"`...)
	default:
		dst = append(dst, `"text":`...)
		dst = appendJSONString(dst, p.Text)
		dst = append(dst, `,"type":"text_delta"`...)
	}
	dst = append(dst, `},"index":`...)
	dst = strconv.AppendInt(dst, int64(o.open-1), 10)
	return append(dst, `,"type":"content_block_delta"}`+"\n\n"...)
}

// addBlock gathers a whole response's blocks in order: a piece of
// another kind, or a tool call's first piece, begins a block.
func (o *AnthropicEncoder) addBlock(p Piece) {
	if !o.inBlock || p.Kind != o.kind || p.Name != "" {
		o.inBlock, o.kind = true, p.Kind
		o.blocks = append(o.blocks, anthropicBlock{kind: p.Kind, name: p.Name, start: len(o.text)})
	}
	o.text = append(o.text, p.Text...)
	o.blocks[len(o.blocks)-1].end = len(o.text)
}

// stopReason is Anthropic's stop_reason.
func (o *AnthropicEncoder) stopReason(e End) string {
	switch {
	case e.Finish == FinishLength:
		return "max_tokens"
	case e.StopSequence != "":
		return "stop_sequence"
	case o.calls > 0:
		return "tool_use"
	}
	return "end_turn"
}

// Close implements Encoder.
func (o *AnthropicEncoder) Close(dst []byte, e End) []byte {
	if !o.Stream {
		o.inBlock = false
		return o.appendBody(dst, e)
	}
	var seq any
	if e.StopSequence != "" {
		seq = e.StopSequence
	}
	if o.open == 0 {
		dst = o.startBlock(dst, Piece{Kind: PieceText})
	}
	dst = o.stopBlock(dst)
	dst = sseEvent(dst, "message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": o.stopReason(e), "stop_sequence": seq},
		"usage": map[string]any{"output_tokens": e.Usage.Completion, "input_tokens": e.Usage.Prompt, "cache_read_input_tokens": e.Usage.Cached}})
	return sseEvent(dst, "message_stop", map[string]any{"type": "message_stop"})
}

// StreamError implements Encoder: an error event.
func (o *AnthropicEncoder) StreamError(dst []byte, e *Error) []byte {
	return sseEvent(dst, "error", json.RawMessage(e.Body(Anthropic)))
}
