package vllm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// An engine streams a completion as server-sent events, as vLLM's OpenAI
// server writes them: one event per chunk, a data line and a blank line,
// and a last event that is the literal [DONE]:
//
//	data: {"id":"cmpl-…","object":"text_completion","created":…,"model":"…","choices":[{"index":0,"text":"…","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[9707]}],"usage":{…}}
//
//	data: [DONE]
//
// Other SSE fields (event:, id:, comments) are skipped.

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
}

// maxSSELine bounds one line of the stream, a chunk's JSON: a longer one
// ends the stream with bufio.ErrTooLong rather than growing the buffer.
const maxSSELine = 16 << 20

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
)

// decodeSSE reads an engine's completion stream, handing each chunk to fn
// in order, until [DONE] (sseDone, nil error) or the first thing that
// stops it (the error says why).
func decodeSSE(r io.Reader, fn func(*chunk)) (sseEnd, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxSSELine)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if string(data) == "[DONE]" {
			return sseDone, nil
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return sseMalformed, err
		}
		fn(&c)
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return sseCut, err
}
