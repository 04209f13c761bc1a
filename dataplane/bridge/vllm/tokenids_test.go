package vllm_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// TestTextWithoutTokenIDs: a chunk with text and no token ids fails the
// stream with an ERROR that says so, instead of being dropped (the router
// then answered 200 with the right counts and empty text). The llama.cpp
// stream is what llama-server (llama.cpp 80fb11ac73e66d89eae2c6a91d8a77428fa733ed,
// node-llama-cpp 3.21.1) answered to the driver's own /v1/completions
// request: no token_ids, its build as system_fingerprint; the error then
// names llama.cpp and the flag that drives it.
func TestTextWithoutTokenIDs(t *testing.T) {
	llama, err := os.ReadFile("testdata/llamacpp-80fb11ac-v1-completions.sse")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, stream string
		hint         bool
	}{
		{"llama.cpp", string(llama), true},
		{"unknown", `data: {"choices":[{"index":0,"text":" Paris","finish_reason":null}]}` + "\n\ndata: [DONE]\n\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write([]byte(c.stream))
			}))
			defer hs.Close()
			_, conn := startBridge(t, hs.URL)
			if err := conn.Send(1, &wire.Generate{Model: []byte("m"), MaxTokens: 3, TopP: 1, Prompt: wire.TokensOf([]uint32{1000, 1001})}); err != nil {
				t.Fatal(err)
			}
			f := next(t, conn, 1)
			var e wire.Error
			if f.Type != wire.TypeError || wire.DecodeFrame(f, &e, nil) != nil || e.Code != wire.CodeStreamFailed {
				t.Fatalf("first frame %s %+v, want a stream ERROR", f.Type, e)
			}
			if !strings.Contains(e.Message, "without token ids") || strings.Contains(e.Message, "--engine-kind llamacpp") != c.hint {
				t.Fatalf("message %q (hint wanted: %v)", e.Message, c.hint)
			}
		})
	}
}
