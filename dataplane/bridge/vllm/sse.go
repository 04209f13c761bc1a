package vllm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
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
// line end): the stream was cut there.

// chunk is one streamed completion chunk (the fields the bridge reads).
type chunk struct {
	Choices []struct {
		TokenIDs     []uint32 `json:"token_ids"`
		FinishReason *string  `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        uint32 `json:"prompt_tokens"`
		CompletionTokens    uint32 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens uint32 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// Error is vLLM's error event, in place of a chunk.
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// maxSSELine bounds one line of the stream, a chunk's JSON: a longer one
// ends the stream with bufio.ErrTooLong rather than growing the buffer.
const maxSSELine = 16 << 20

// maxEngineMessage bounds the part of an engine's error message passed
// on to the router, as for an HTTP error: an ERROR frame holds at most
// 64 KiB of message, and one that does not fit is not sent at all.
const maxEngineMessage = 4096

// engineMessage is an error event's message as the stream's error says it.
func engineMessage(m string) string {
	if len(m) > maxEngineMessage {
		m = strings.ToValidUTF8(m[:maxEngineMessage], "")
	}
	if m == "" {
		return "an error event without a message"
	}
	return m
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
)

// decodeSSE reads an engine's completion stream, handing each chunk to fn
// in order, until [DONE] (sseDone, nil error) or the first thing that
// stops it (the error says why).
func decodeSSE(r io.Reader, fn func(*chunk)) (sseEnd, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSSELine)
	unended := false // the line just scanned ran into EOF without its line end
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		n, line, err := bufio.ScanLines(data, atEOF)
		unended = atEOF && line != nil && bytes.IndexByte(data, '\n') < 0
		return n, line, err
	})
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if string(data) == "[DONE]" { // taken even without its line end: nothing can follow it
			return sseDone, nil
		}
		if unended {
			break // half a chunk: the engine stopped mid-event
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return sseMalformed, err
		}
		if c.Error != nil {
			return sseEngineError, errors.New(engineMessage(c.Error.Message))
		}
		fn(&c)
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return sseCut, err
}
