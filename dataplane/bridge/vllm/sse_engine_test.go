package vllm_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// TestEngineErrorEvent: when vLLM fails a generation mid-stream it sends an
// error event and then [DONE]; the router gets the tokens sent before it
// and then the stream's ERROR with the engine's message, not a normal end.
func TestEngineErrorEvent(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"cmpl-2a","object":"text_completion","created":1764578300,"model":"m","choices":[{"index":0,"text":" I","logprobs":null,"finish_reason":null,"stop_reason":null,"token_ids":[358]}],"usage":{"prompt_tokens":2,"total_tokens":3,"completion_tokens":1,"prompt_tokens_details":null}}`+"\n\n")
		fmt.Fprint(w, `data: {"error": {"message": "CUDA error: an illegal memory access was encountered", "type": "InternalServerError", "param": null, "code": 500}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer hs.Close()
	_, c := startBridge(t, hs.URL)
	if err := c.Send(1, &wire.Generate{Model: []byte("m"), MaxTokens: 4, TopP: 1, Prompt: wire.TokensOf([]uint32{1, 2})}); err != nil {
		t.Fatal(err)
	}
	var m wire.TokensMsg
	if f := next(t, c, 1); f.Type != wire.TypeTokens || wire.DecodeFrame(f, &m, nil) != nil || m.Last() || fmt.Sprint(m.Tokens.AppendTo(nil)) != "[358]" {
		t.Fatalf("first frame %s %+v", f.Type, m)
	}
	var e wire.Error
	if f := next(t, c, 1); f.Type != wire.TypeError || wire.DecodeFrame(f, &e, nil) != nil || e.Code != wire.CodeStreamFailed ||
		!strings.Contains(e.Message, "illegal memory access") {
		t.Fatalf("after the error event: %s %+v", f.Type, e)
	}
}
