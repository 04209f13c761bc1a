package vllm

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
)

// An engine streams a completion as server-sent events, as vLLM's OpenAI
// server writes them: one event per chunk, a data line and a blank line,
// and a last event that is the literal [DONE]:
//
//	data: {"id":"cmpl-…","object":"text_completion","created":…,"model":"…","choices":[{"index":0,"text":"…","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[9707]}],"usage":{…}}
//
//	data: [DONE]
//
// When generation fails mid-stream, vLLM sends an error event instead of
// a chunk, then [DONE] (older versions add "object": "error"):
//
//	data: {"error": {"message": "…", "type": "BadRequestError", "param": null, "code": 400}}
//
// Other SSE fields (event:, id:, comments) are skipped. A last line the
// stream ends in the middle of is no event (SSE dispatches an event at its
// line end): the stream was cut there (bridgeutil.ReadSSE).

// chunk is one streamed completion chunk (the fields the bridge reads).
type chunk struct {
	Choices []struct {
		Text         string   `json:"text"`
		TokenIDs     []uint32 `json:"token_ids"`
		FinishReason *string  `json:"finish_reason"`
		// Logprobs are the chunk's tokens' (sampling.go), when asked for.
		Logprobs *completionLogprobs `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        uint32 `json:"prompt_tokens"`
		CompletionTokens    uint32 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens uint32 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// SystemFingerprint and Timings are not vLLM's: llama.cpp's server
	// sends them ("b6000-80fb11a", its prompt and generation timings),
	// which tells a llama.cpp server behind the vllm driver apart.
	SystemFingerprint string          `json:"system_fingerprint"`
	Timings           json.RawMessage `json:"timings"`
	// Error is vLLM's error event, in place of a chunk.
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// sseEnd is how an engine's stream ended.
type sseEnd int

const (
	// sseDone: the stream reached [DONE].
	sseDone sseEnd = iota
	// sseMalformed: a data line was not a completion chunk; the error is
	// the JSON decoder's.
	sseMalformed
	// sseCut: the stream ended, or its reading failed, before [DONE]; the
	// error is the read error, io.ErrUnexpectedEOF for a plain EOF.
	sseCut
	// sseEngineError: the engine sent an error event; the error is its
	// message.
	sseEngineError
	// sseRefused: the chunk handler refused a chunk; the error is its.
	sseRefused
)

// errorEvent is what a streamed chunk type says of itself: whether it is
// the engine's error event, and its message. vLLM's OpenAI server and
// SGLang's native /generate both send {"error": {"message": ...}}.
type errorEvent interface {
	engineError() (string, bool)
}

func (c *chunk) engineError() (string, bool) {
	if c.Error == nil {
		return "", false
	}
	return c.Error.Message, true
}

// decodeSSE reads an engine's stream of C chunks (an OpenAI completion
// stream, or SGLang's /generate stream), handing each chunk to fn in
// order, until [DONE] (sseDone, nil error) or the first thing that stops
// it (the error says why), fn's error included.
func decodeSSE[C any, P interface {
	*C
	errorEvent
}](r io.Reader, fn func(P) error) (sseEnd, error) {
	end, err := sseCut, error(nil)
	rerr := bridgeutil.ReadSSE(r, func(data []byte, cut bool) bool {
		if string(data) == "[DONE]" { // taken even without its line end: nothing can follow it
			end = sseDone
			return false
		}
		if cut {
			err = io.ErrUnexpectedEOF // half a chunk: the engine stopped mid-event
			return false
		}
		c := P(new(C))
		if err = json.Unmarshal(data, c); err != nil {
			end = sseMalformed
			return false
		}
		if msg, ok := c.engineError(); ok {
			end, err = sseEngineError, errors.New(bridgeutil.EngineMessage(msg))
			return false
		}
		if err = fn(c); err != nil {
			end = sseRefused
			return false
		}
		return true
	})
	if end == sseCut && err == nil {
		err = rerr
	}
	return end, err
}
