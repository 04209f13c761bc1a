package llamacpp

import "errors"

// Errors of the package. The connect checks wrap the refusals (wrong kind,
// endpoint off, wrong model, tokenizer) so kvgate-bridge can tell them,
// which no retry fixes, from an engine that does not answer yet.
var (
	// ErrUnreachable: the server did not answer, or answered 503 (llama.cpp
	// says "Loading model" while it loads); connecting retries.
	ErrUnreachable = errors.New("llamacpp: the server does not answer yet")
	// ErrNotLlamaCpp: the server is not llama.cpp's (no /props with a
	// build, or /v1/models says another owner, such as vLLM).
	ErrNotLlamaCpp = errors.New("llamacpp: the engine is not a llama.cpp server")
	// ErrEndpointOff: llama-server runs without an endpoint the bridge
	// reads (--slots, --metrics).
	ErrEndpointOff = errors.New("llamacpp: a llama-server endpoint the bridge needs is off")
	// ErrModelMismatch: the server serves another model than --model.
	ErrModelMismatch = errors.New("llamacpp: the server serves another model")
	// ErrTokenizerMismatch: the server tokenizes a probe differently from
	// kvgate's tokenizer, so the ids routers send would mean other text.
	ErrTokenizerMismatch = errors.New("llamacpp: the server's tokenizer disagrees with kvgate's")
	// ErrSchema: a llama.cpp answer did not have the shape this package
	// reads (at the commit the package doc names).
	ErrSchema = errors.New("llamacpp: answer does not match llama.cpp's schema")
)

// Refused reports whether err refuses the server for good (wrong kind,
// endpoint off, wrong model or tokenizer), as opposed to one that may
// answer later.
func Refused(err error) bool {
	return errors.Is(err, ErrNotLlamaCpp) || errors.Is(err, ErrEndpointOff) ||
		errors.Is(err, ErrModelMismatch) || errors.Is(err, ErrTokenizerMismatch)
}
