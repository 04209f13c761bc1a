package gateway

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim/simtest"
	"github.com/kvgate/kvgate/wire"
)

// TestFirstTokenTimeout: a request whose engine never sends its first
// token is answered 504 in the API's own shape, streamed or not, and its
// stream is cancelled. The engine never answering, the deadline passes
// whatever its length and however late a tick notices it: nothing here
// races a clock.
func TestFirstTokenTimeout(t *testing.T) {
	eng, addr := startSilentEngine(t, "silent-0", wire.FeatureSnapshot, nil)
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := simtest.Pool(t, pcfg, kvstore.New(kvstore.Options{}), addr)
	logs := &syncBuffer{}
	g := &Gateway{Tok: tok, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool,
		Log: slog.New(slog.NewTextHandler(logs, nil)), FirstTokenTimeout: 50 * time.Millisecond}
	tg := serveGateway(t, g, logs)
	for i, tc := range []struct{ name, path, body, shape string }{
		{"openai", "/v1/completions", `{"model":"` + model + `","prompt":"hi","max_tokens":4}`, `"type":"server_error"}}`},
		{"openai-stream", "/v1/completions", `{"model":"` + model + `","prompt":"hi","max_tokens":4,"stream":true}`, `"type":"server_error"}}`},
		{"anthropic", "/v1/messages", `{"model":"` + model + `","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, `"type":"api_error"},"type":"error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := post(t, tg.base+tc.path, "", tc.body)
			if resp.StatusCode != 504 || !strings.HasPrefix(out, `{"error":{`) || !strings.Contains(out, tc.shape) || !strings.Contains(out, "no first token from the engine in time") {
				t.Fatalf("%d: %s", resp.StatusCode, out)
			}
			waitFor(t, func() bool { g, c, _ := eng.counts(); return g == i+1 && c == i+1 })
		})
	}
	waitInflightZero(t, tg.srv)
}
