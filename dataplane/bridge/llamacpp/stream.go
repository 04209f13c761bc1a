package llamacpp

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
)

// llama-server streams a /completion as server-sent events, one data line
// per generated token and a last one with "stop": true; no [DONE] follows
// (handle_completions_impl, TASK_RESPONSE_TYPE_NONE). With the driver's
// return_tokens, timings_per_token and response_fields (which trims the
// last event only), at commit 80fb11ac:
//
//	data: {"index":0,"content":"orre","tokens":[92433],"stop":false,"id_slot":-1,
//	       "tokens_predicted":1,"tokens_evaluated":100,"timings":{"cache_n":99,"prompt_n":1,...}}
//
//	data: {"content":"","tokens":[],"stop":true,"id_slot":1,"tokens_predicted":12,
//	       "tokens_evaluated":100,"tokens_cached":111,"stop_type":"limit","truncated":false,
//	       "timings":{"cache_n":99,"prompt_n":1,...}}
//
// A failure after the first event is an error event, and the stream ends:
//
//	data: {"error":{"code":500,"message":"...","type":"server_error"}}
//
// tokens holds the event's own token (one; several never at this commit);
// a token after which the text ends inside a UTF-8 sequence gets no event
// of its own, and the event that completes the character carries only
// the completing token (see recover.go): tokens_predicted, the count so
// far, says how many were left out. Comment lines (":", pings) are
// skipped.

// event is one data line of the stream (the fields the bridge reads).
type event struct {
	Content         string   `json:"content"`
	Tokens          []uint32 `json:"tokens"`
	Stop            bool     `json:"stop"`
	IDSlot          int      `json:"id_slot"`
	TokensPredicted int      `json:"tokens_predicted"`
	TokensEvaluated int      `json:"tokens_evaluated"`
	TokensCached    int      `json:"tokens_cached"`
	StopType        string   `json:"stop_type"`
	Truncated       bool     `json:"truncated"`
	Timings         *struct {
		CacheN  int `json:"cache_n"`
		PromptN int `json:"prompt_n"`
	} `json:"timings"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamEnd is how a stream ended.
type streamEnd int

const (
	// streamDone: the last event ("stop": true) was handed over.
	streamDone streamEnd = iota
	// streamMalformed: a data line was not an event; the error is the
	// JSON decoder's, or says which count was impossible.
	streamMalformed
	// streamCut: the stream ended, or its reading failed, before the last
	// event; the error is the read error, io.ErrUnexpectedEOF for EOF.
	streamCut
	// streamEngineError: the server sent an error event; the error is
	// its message.
	streamEngineError
	// streamRefused: the event handler refused an event; the error is its.
	streamRefused
)

var errCounts = errors.New("negative or impossible count")

// decodeStream reads a /completion stream, handing each event to fn in
// order, until the last event (streamDone, nil error) or the first thing
// that stops it.
func decodeStream(r io.Reader, fn func(*event) error) (streamEnd, error) {
	end, err := streamCut, error(nil)
	rerr := bridgeutil.ReadSSE(r, func(data []byte, cut bool) bool {
		if cut {
			err = io.ErrUnexpectedEOF // half an event: the server stopped mid-line
			return false
		}
		var ev event
		if err = json.Unmarshal(data, &ev); err != nil {
			end = streamMalformed
			return false
		}
		if ev.Error != nil {
			end, err = streamEngineError, errors.New(bridgeutil.EngineMessage(ev.Error.Message))
			return false
		}
		if ev.TokensPredicted < 0 || ev.TokensEvaluated < 0 || ev.TokensCached < 0 ||
			ev.Timings != nil && (ev.Timings.CacheN < 0 || ev.Timings.PromptN < 0) {
			end, err = streamMalformed, errCounts
			return false
		}
		if err = fn(&ev); err != nil {
			end = streamRefused
			return false
		}
		if ev.Stop {
			end = streamDone
			return false
		}
		return true
	})
	if end == streamCut && err == nil {
		err = rerr
	}
	return end, err
}
