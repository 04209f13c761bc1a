package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

func ids(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = "100"
	}
	return "[" + strings.Join(s, ",") + "]"
}

// TestRequestLimits: what the context or the wire protocol cannot take is
// a 400 naming the field, at the gateway; the boundary cases vLLM accepts
// are served. The gateway's context here is 64 tokens.
func TestRequestLimits(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{maxModelLen: 64})
	huge := strings.Repeat("hello world ", 400_000) // 4.8 MB of text
	stops := ids(1025)
	cases := []struct {
		name, path, body string
		status           int
		want             []string
	}{
		{"too many stop_token_ids", "/v1/completions", `{"model":"` + model + `","prompt":"x","stop_token_ids":` + stops + `}`, 400,
			[]string{`"param":"stop_token_ids"`, "at most 1024"}},
		{"prompt plus max_tokens is the context", "/v1/completions", `{"model":"` + model + `","prompt":` + ids(63) + `,"max_tokens":1}`, 200,
			[]string{`"prompt_tokens":63`, `"completion_tokens":1`}},
		{"prompt of the whole context", "/v1/completions", `{"model":"` + model + `","prompt":` + ids(64) + `,"max_tokens":1}`, 400,
			[]string{`"param":"prompt"`, "maximum context length is 64"}},
		{"max_tokens over what the context leaves", "/v1/completions", `{"model":"` + model + `","prompt":` + ids(60) + `,"max_tokens":5}`, 400,
			[]string{`"param":"max_tokens"`, "(5 \\u003e 64 - 60)"}},
		{"default max_tokens cut to fit", "/v1/completions", `{"model":"` + model + `","prompt":` + ids(60) + `,"ignore_eos":true}`, 200,
			[]string{`"completion_tokens":4`}},
		{"nested ids outside the vocabulary", "/v1/completions", `{"model":"` + model + `","prompt":[[1,999999999]]}`, 400,
			[]string{`"param":"prompt"`, "outside the vocabulary"}},
		{"huge text prompt given up early", "/v1/completions", `{"model":"` + model + `","prompt":"` + huge + `"}`, 400,
			[]string{`"param":"prompt"`, "more than"}},
		{"huge conversation given up early", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"` + huge + `"}]}`, 400,
			[]string{`"param":"messages"`, "more than"}},
		{"chat default max_tokens cut to fit", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"ignore_eos":true}`, 200,
			[]string{`"finish_reason":"length"`}},
		{"tools of the wrong type", "/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"tools":"f"}`, 400,
			[]string{`"param":"tools"`}},
		{"system of the wrong type", "/v1/messages", `{"model":"` + model + `","max_tokens":1,"system":5,"messages":[{"role":"user","content":"hi"}]}`, 400,
			[]string{`"type":"error"`, `field \"system\"`}},
		{"wrong type, JSON words", "/v1/completions", `{"model":"` + model + `","prompt":"x","max_tokens":"many"}`, 400,
			[]string{`must be an integer`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			resp, body := post(t, gw.base+c.path, "", c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d: %.300s", resp.StatusCode, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Fatalf("no %q in %.300s", w, body)
				}
			}
			t.Logf("answered in %v", time.Since(start).Round(time.Millisecond))
		})
	}
	waitInflightZero(t, gw.srv)
}

// TestEngineContextIsHeld: the engines' announced context (40 tokens,
// under the tokenizer's) is what the gateway holds prompts to, before any
// engine sees them.
func TestEngineContextIsHeld(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{simLen: 40})
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"model":"` + model + `","prompt":` + ids(39) + `,"max_tokens":1}`, 200, `"completion_tokens":1`},
		{`{"model":"` + model + `","prompt":` + ids(40) + `,"max_tokens":1}`, 400, "maximum context length is 40 tokens"},
		{`{"model":"` + model + `","prompt":` + ids(30) + `,"max_tokens":11}`, 400, `"param":"max_tokens"`},
	} {
		resp, out := post(t, gw.base+"/v1/completions", "", c.body)
		if resp.StatusCode != c.status || !strings.Contains(out, c.want) || strings.Contains(out, "the engine refused") {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, out)
		}
	}
	waitInflightZero(t, gw.srv)
}

// TestEngineRefusalIsNotRetried: an engine that refuses a request for its
// content (a stream ERROR, bad_request: here a prompt larger than its GPU
// KV cache, which it does not announce as a limit) gets a 400 to the
// client in the API's shape, and no other engine is tried with it.
func TestEngineRefusalIsNotRetried(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{simBlocks: 2}) // 32 tokens of KV cache
	for _, path := range []string{"/v1/completions", "/v1/messages"} {
		body := `{"model":"` + model + `","prompt":` + ids(50) + `,"max_tokens":1}`
		if path == "/v1/messages" {
			body = `{"model":"` + model + `","max_tokens":1,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 60) + `"}]}`
		}
		resp, out := post(t, gw.base+path, "", body)
		if resp.StatusCode != 400 || !strings.Contains(out, "the engine refused the request") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, out)
		}
		if path == "/v1/messages" && !strings.Contains(out, `"type":"error"`) {
			t.Fatalf("not in Anthropic's shape: %s", out)
		}
	}
	if strings.Contains(gw.log.String(), "re-routing") {
		t.Fatalf("a refused request was retried:\n%s", gw.log.String())
	}
	waitInflightZero(t, gw.srv)
}

// TestMethodsAuthAndRequestIDs: /health and /ready take GET and HEAD
// only; HEAD answers without content; the Bearer scheme is matched in any
// case; an X-Request-Id that is not a plain token is replaced before it is
// reflected or logged.
func TestMethodsAuthAndRequestIDs(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{keys: map[string]bool{"k1": true}})
	do := func(method, path, auth, reqID string) (*http.Response, string) {
		req, _ := http.NewRequest(method, gw.base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if reqID != "" {
			req.Header.Set("X-Request-Id", reqID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, m := range []string{"DELETE", "POST", "PUT"} {
		if resp, body := do(m, "/health", "", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(body, `"error"`) {
			t.Fatalf("%s /health: %d %q %s", m, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
	if resp, body := do("HEAD", "/health", "", ""); resp.StatusCode != 200 || body != "" || resp.ContentLength != int64(len(`{"status":"ok"}`)) {
		t.Fatalf("HEAD /health: %d %q %d", resp.StatusCode, body, resp.ContentLength)
	}
	if resp, body := do("HEAD", "/v1/models", "bearer k1", ""); resp.StatusCode != 200 || body != "" {
		t.Fatalf("HEAD /v1/models: %d %q", resp.StatusCode, body)
	}
	for auth, want := range map[string]int{"bearer k1": 200, "BEARER k1": 200, "Bearer k1": 200, "Bearer  k1": 200, "Basic k1": 401, "bearer k2": 401, "bearerk1": 401} {
		if resp, body := do("GET", "/v1/models", auth, ""); resp.StatusCode != want {
			t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	for id, kept := range map[string]bool{"abc-123_x.y:z": true, `a"b`: false, "a b": false, strings.Repeat("x", 129): false, "<script>": false} {
		resp, _ := do("GET", "/health", "", id)
		got := resp.Header.Get("X-Request-Id")
		if (got == id) != kept || got == "" {
			t.Errorf("X-Request-Id %q answered %q", id, got)
		}
	}
	waitInflightZero(t, gw.srv)
}

// TestInflightAfterFailures: after each way a request can fail, a client
// that leaves mid-stream included, the in-flight count is back to zero,
// and Shutdown then returns at once rather than at its deadline.
func TestInflightAfterFailures(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{keys: map[string]bool{"k1": true}, realTime: true})
	failures := []struct{ path, key, body string }{
		{"/v1/completions", "", `{}`},                              // 401
		{"/v1/completions", "k1", `{`},                             // 400
		{"/v1/completions", "k1", `{"model":"nope","prompt":"x"}`}, // 404
		{"/nowhere", "k1", `{}`},                                   // 404
		{"/v1/models", "k1", `{}`},                                 // 405
	}
	for _, f := range failures {
		post(t, gw.base+f.path, f.key, f.body)
		waitInflightZero(t, gw.srv)
	}
	// A client that reads a few events of an endless stream and leaves.
	for _, stream := range []bool{true, false} {
		b, _ := json.Marshal(map[string]any{"model": model, "prompt": "go on", "max_tokens": 100_000, "ignore_eos": true, "stream": stream})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", gw.base+"/v1/completions", strings.NewReader(string(b)))
		req.Header.Set("x-api-key", "k1")
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // cancelled before the head: the non-streamed case
			}
			sc := bufio.NewScanner(resp.Body)
			for i := 0; i < 3 && sc.Scan(); i++ {
			}
			cancel()
			resp.Body.Close()
		}()
		if !stream {
			waitFor(t, func() bool { return gw.srv.Active() == 1 })
			cancel()
		}
		<-done
		cancel()
		waitInflightZero(t, gw.srv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := gw.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after the failures: %v", err)
	}
	t.Logf("Shutdown took %v", time.Since(start).Round(time.Millisecond))
}

// TestPanicAnswers500: a panic on the request path is answered 500 in the
// API's shape and logged with its stack; the server goes on serving.
func TestPanicAnswers500(t *testing.T) {
	logs := &syncBuffer{}
	g := &Gateway{Log: slog.New(slog.NewTextHandler(logs, nil))} // no pool, no tokenizer: every model check panics
	hc := httpx.DefaultConfig()
	hc.Addr, hc.EventLoops = "127.0.0.1:0", 1
	srv := httpx.NewServer(hc, g)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	<-srv.Booted()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
		http.DefaultClient.CloseIdleConnections()
	}()
	base := "http://" + srv.Addr()
	for path, shape := range map[string]string{"/v1/messages": `"type":"error"`, "/v1/completions": `"server_error"`} {
		resp, body := post(t, base+path, "", `{"model":"m","max_tokens":1,"prompt":"x","messages":[{"role":"user","content":"x"}]}`)
		if resp.StatusCode != 500 || !strings.Contains(body, shape) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if !strings.Contains(logs.String(), "request panic") || !strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("panic not logged with its stack:\n%s", logs.String())
	}
	if resp := get(t, base+"/health"); resp.StatusCode != 200 {
		t.Fatalf("after the panics: %d", resp.StatusCode)
	}
	waitInflightZero(t, srv)
}

// waitFor polls cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond) // the poll interval
	}
}

// TestPromptOverTheWireLimit: with a context larger than the wire's
// prompt limit (--max-model-len 2M), a prompt over the wire's 1M tokens is
// a 400 at the gateway, not a GENERATE that would break the engine's
// connection.
func TestPromptOverTheWireLimit(t *testing.T) {
	gw := startGatewayWith(t, gwOptions{maxModelLen: 2 << 20, simLen: 2 << 20}) // engines of the same context
	resp, body := post(t, gw.base+"/v1/completions", "", `{"model":"`+model+`","prompt":`+ids(1<<20+1)+`,"max_tokens":1}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"param":"prompt"`) || !strings.Contains(body, "at most 1048576") {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	waitInflightZero(t, gw.srv)
}
