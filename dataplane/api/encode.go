package api

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
