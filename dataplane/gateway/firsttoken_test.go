package gateway

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim/simtest"
	"github.com/kvgate/kvgate/wire"
	wireserve "github.com/kvgate/kvgate/wire/serve"
)

// silentEngine takes every GENERATE and never answers it, as a hung
// engine: no frame comes on the stream until the router cancels it.
type silentEngine struct {
	srv *wireserve.Server

	mu                   sync.Mutex
	generated, cancelled int
}

// startSilentEngine serves a silentEngine on a loopback port as silent-0.
func startSilentEngine(t *testing.T) (*silentEngine, string) {
	t.Helper()
	b := &silentEngine{}
	b.srv = wireserve.New(wireserve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained,
		ID: "silent-0", Features: wire.FeatureSnapshot, BlockSize: 16, MaxBatchedTokens: 8192, Models: []string{model}}}, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(b.srv.Close)
	return b, ln.Addr().String()
}

// Generate takes a request and sends nothing for it.
func (b *silentEngine) Generate(wireserve.Key, *wire.Generate) error {
	b.mu.Lock()
	b.generated++
	b.mu.Unlock()
	return nil
}

// Cancel counts the router's cancel of a stream.
func (b *silentEngine) Cancel(wireserve.Key) {
	b.mu.Lock()
	b.cancelled++
	b.mu.Unlock()
}

// Load reports an idle engine.
func (b *silentEngine) Load() []wire.Load { return []wire.Load{{}} }

// Snapshot answers with an empty cache.
func (b *silentEngine) Snapshot(conn uint64, id uint32) {
	_ = b.srv.SendTo(conn, &wire.Snapshot{SnapshotID: id, Last: true})
}

// Idle reports that nothing runs.
func (b *silentEngine) Idle() bool { return true }

func (b *silentEngine) counts() (generated, cancelled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.generated, b.cancelled
}

// TestFirstTokenTimeout: a request whose engine never sends its first
// token is answered 504 in the API's own shape, streamed or not, and its
// stream is cancelled. The engine never answering, the deadline passes
// whatever its length and however late a tick notices it: nothing here
// races a clock.
func TestFirstTokenTimeout(t *testing.T) {
	eng, addr := startSilentEngine(t)
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
			waitFor(t, func() bool { g, c := eng.counts(); return g == i+1 && c == i+1 })
		})
	}
	waitInflightZero(t, tg.srv)
}
