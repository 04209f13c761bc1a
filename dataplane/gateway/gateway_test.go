package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

const model = "Qwen/Qwen3-8B"

// startGateway serves a Gateway in this process on loopback, in front of
// two zero-cost simulated engines, and returns its base URL.
func startGateway(t *testing.T, keys map[string]bool) string {
	return startGatewayWith(t, gwOptions{keys: keys}).base
}

// gwOptions shape a test gateway: API keys, the gateway's context length
// and the simulated engines' own (which they announce), and their GPU
// blocks.
type gwOptions struct {
	keys                           map[string]bool
	maxModelLen, simLen, simBlocks int
	realTime                       bool         // the engines take their default profile's time, not none
	tools                          bool         // the engines answer prompts with tools with tool calls
	noSampling                     bool         // the engines announce no wire.FeatureSampling
	observe                        *Observer    // the gateway's access log and tracing (accesslog_test.go)
	simLog                         *slog.Logger // the engines' log; nil: none
}

// testGateway is a running test gateway.
type testGateway struct {
	base string
	srv  *httpx.Server
	log  *syncBuffer // the gateway's log
}

func startGatewayWith(t testing.TB, o gwOptions) *testGateway {
	t.Helper()
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile = model, sim.ZeroProfile
	cfg.Rank.NoRandomEOS = true // answers have the length asked for (finish_reason length, stop_reason max_tokens)
	if o.realTime {
		cfg.Rank.Profile = sim.DefaultProfile
	}
	if o.simLen > 0 {
		cfg.Rank.MaxModelLen = o.simLen
	}
	if o.simBlocks > 0 {
		cfg.Rank.GPUBlocks = o.simBlocks
	}
	cfg.NoSampling, cfg.Logger = o.noSampling, o.simLog
	if o.tools {
		cfg.Rank.Tools = sim.NewToolCalls(func(s string) []uint32 { return tok.Encode(nil, s, false) },
			func(ids []uint32) string { return tok.DecodeString(ids, false) })
	}
	sims, err := sim.StartLocal(2, cfg, "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sims.Close)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), sims.Addrs)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, 2); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Tok: tok, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool, Log: log,
		APIKeys: o.keys, Retries: 1, FirstTokenTimeout: time.Minute, MaxModelLen: o.maxModelLen, Observe: o.observe}
	return serveGateway(t, g, logs)
}

// serveGateway serves g on loopback until the test ends; logs is g's log.
func serveGateway(t testing.TB, g *Gateway, logs *syncBuffer) *testGateway {
	t.Helper()
	log := g.Log
	hc := httpx.DefaultConfig()
	hc.Addr, hc.EventLoops, hc.Logger = "127.0.0.1:0", 1, log
	hc.KeepRaw = g.Passthrough != nil // as kvgate keeps them with --http-engine: the relay sends them
	srv := httpx.NewServer(hc, g)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	<-srv.Booted()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	})
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // the client's keep-alive goroutines
	return &testGateway{base: "http://" + srv.Addr(), srv: srv, log: logs}
}

func post(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// get fetches url and closes the body.
func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestEndpoints: each endpoint's answer through a real HTTP server, in
// its API's shape, streamed and whole, and every refusal in the right one.
func TestEndpoints(t *testing.T) {
	base := startGateway(t, nil)
	cases := []struct {
		name, path, body string
		status           int
		want             []string // parts of the body
		header           string   // a header that must be set
	}{
		{"completion", "/v1/completions", `{"model":"` + model + `","prompt":"Hello","max_tokens":4}`, 200,
			[]string{`"object":"text_completion"`, `"finish_reason":"length"`, `"completion_tokens":4`}, "x-kvgate-engine"},
		{"completion ids", "/v1/completions", `{"model":"` + model + `","prompt":[1,2,3],"max_tokens":2}`, 200,
			[]string{`"prompt_tokens":3`}, "x-kvgate-engine"},
		{"chat stream", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`, 200,
			[]string{`"role":"assistant"`, `"object":"chat.completion.chunk"`, `"usage":{`, "data: [DONE]"}, "x-kvgate-engine"},
		{"messages", "/v1/messages", `{"model":"` + model + `","max_tokens":3,"messages":[{"role":"user","content":"Hi"}]}`, 200,
			[]string{`"type":"message"`, `"stop_reason":"max_tokens"`, `"output_tokens":3`}, "x-kvgate-engine"},
		{"messages stream", "/v1/messages", `{"model":"` + model + `","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`, 200,
			[]string{"event: message_start", "event: message_stop"}, ""},
		{"tokenize", "/tokenize", `{"prompt":"Hello world"}`, 200, []string{`"count":2`}, ""},
		{"detokenize", "/detokenize", `{"tokens":[9707,1879]}`, 200, []string{`"prompt":"Hello world"`}, ""},
		{"unknown model", "/v1/chat/completions", `{"model":"nope","messages":[]}`, 404, []string{`"type":"not_found_error"`}, ""},
		{"unknown model anthropic", "/v1/messages", `{"model":"nope","max_tokens":1,"messages":[]}`, 404, []string{`"type":"error"`, `"not_found_error"`}, ""},
		{"prompt id outside vocabulary", "/v1/completions", `{"model":"` + model + `","prompt":[999999999]}`, 400, []string{`"param":"prompt"`}, ""},
		{"detokenize outside vocabulary", "/detokenize", `{"tokens":[999999999]}`, 400, []string{`"param":"tokens"`}, ""},
		{"bad JSON anthropic", "/v1/messages", `{`, 400, []string{`"type":"error"`, "malformed JSON"}, ""},
		{"no route", "/v2/x", `{}`, 404, []string{"no route for /v2/x"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, base+c.path, "", c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Fatalf("no %q in %s", w, body)
				}
			}
			if c.header != "" && resp.Header.Get(c.header) == "" {
				t.Fatalf("no %s header", c.header)
			}
			if resp.Header.Get("x-request-id") == "" {
				t.Fatal("no x-request-id")
			}
		})
	}
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct{ Data []struct{ ID string } }
	err = json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != model {
		t.Fatalf("models: %+v %v", models, err)
	}
	if resp := get(t, base+"/v1/completions"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET completions: %d", resp.StatusCode)
	}
	if resp := get(t, base+"/ready"); resp.StatusCode != 200 {
		t.Fatalf("ready: %d", resp.StatusCode)
	}
}

func TestAPIKeys(t *testing.T) {
	base := startGateway(t, map[string]bool{"k1": true})
	body := `{"model":"` + model + `","prompt":"x","max_tokens":1}`
	if resp, b := post(t, base+"/v1/completions", "", body); resp.StatusCode != 401 || !strings.Contains(b, "authentication_error") {
		t.Fatalf("no key: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, base+"/v1/completions", "k2", body); resp.StatusCode != 401 {
		t.Fatalf("wrong key: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, base+"/v1/completions", "k1", body); resp.StatusCode != 200 {
		t.Fatalf("right key: %d %s", resp.StatusCode, b)
	}
	if resp := get(t, base+"/health"); resp.StatusCode != 200 {
		t.Fatalf("health needs no key: %d", resp.StatusCode)
	}
}

func TestRouteError(t *testing.T) {
	plain := &genRequest{Request: &api.Request{Model: "m"}}
	guided := &genRequest{Request: &api.Request{Model: "m", Guided: []byte(`{}`)}}
	cases := []struct {
		name   string
		err    error
		req    *genRequest
		status int
		param  string
		retry  int
	}{
		{"no engine", route.ErrNoEngine, plain, 503, "", 1},
		{"no engine with structured output", route.ErrNoEngine, guided, 400, "response_format", 0},
		{"queue full", route.ErrQueueFull, plain, 429, "", 1},
		{"other", errors.New("boom"), plain, 500, "", 0},
	}
	for _, c := range cases {
		e := routeError(c.err, c.req)
		if e.Status != c.status || e.Param != c.param || e.RetryAfter != c.retry {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
	for f, want := range map[wire.FinishReason]api.Finish{wire.FinishLength: api.FinishLength, wire.FinishAbort: api.FinishAbort,
		wire.FinishCancelled: api.FinishAbort, wire.FinishStop: api.FinishStop} {
		if got := finishOf(f); got != want {
			t.Errorf("finish %d: %v", f, got)
		}
	}
}

// TestNewRequestID: fresh ids are 24 lowercase hex digits, unique, in
// one allocation.
func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("id %q (seen %v)", id, seen[id])
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(100, func() { _ = newRequestID() }); n != 1 {
		t.Fatalf("%v allocations per id", n)
	}
}
