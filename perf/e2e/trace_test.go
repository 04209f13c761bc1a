//go:build e2e

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/dataplane/tracing/tracingtest"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// TestTraceThroughBridge: a client's traceparent continues through
// kvgate (exporting OTLP/HTTP to an in-test collector) and kvgate-bridge
// to the engine's HTTP request: vLLM's /v1/completions, SGLang's
// /generate (fakes) and a real llama-server's /completion. The collector
// gets kvgate's spans in the client's trace, a child of the client's
// span; the engine gets a traceparent of the same trace whose parent is
// kvgate's engine span; kvgate's access line names the trace.
func TestTraceThroughBridge(t *testing.T) {
	fake := func(enc vllmtest.Encoding, args ...string) func(t *testing.T) (*headerProxy, string) {
		return func(t *testing.T) (*headerProxy, string) {
			f, err := vllmtest.Start(model, 16, 48, enc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			engine := newHeaderProxy(t, f.URL)
			br := start(t, "kvgate-bridge", append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
				"--engine-url", engine.URL, "--model", model, "--block-size", "16", "--id", "bridged-0"}, args...)...)
			return engine, br.waitLog(t, "bridge serving")["addr"].(string)
		}
	}
	for _, tc := range []struct {
		name, path string // path: the engine's generation endpoint
		engine     func(t *testing.T) (proxy *headerProxy, bridge string)
	}{
		{"vllm", "/v1/completions", fake(vllmtest.Tagged)},
		{"sglang", "/generate", fake(vllmtest.SGLang, "--engine-kind", "sglang")},
		{"llamacpp", "/completion", func(t *testing.T) (*headerProxy, string) {
			srv := llamacpptest.Start(t, llamacpp.Config{Parallel: 1, CtxSize: 2048, Args: []string{"--alias", model}})
			engine := newHeaderProxy(t, srv.URL)
			return engine, startLlamaBridge(t, engine.URL, "--id", "bridged-0")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engine, bridge := tc.engine(t)
			traceThroughBridge(t, engine, bridge, tc.path)
		})
	}
}

func traceThroughBridge(t *testing.T, engine *headerProxy, bridge, path string) {
	col := tracingtest.NewCollector(t)
	kv, base := startKvgate(t, "--engine", bridge, "--otlp-endpoint", col.URL, "--access-log-sample", "1")
	waitReady(t, base)

	traceID, clientSpan := randomHex(16), randomHex(8)
	b := []byte(`{"model":"` + model + `","prompt":"Tracing through the bridge.","max_tokens":4,"ignore_eos":true,"stream":true}`)
	req, _ := http.NewRequest("POST", base+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	req.Header.Set("tracestate", "client=e2e")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("traced completion: %d %s", resp.StatusCode, body)
	}
	access := kv.waitLog(t, "access")
	if access["trace_id"] != traceID || access["engine"] != "bridged-0" || access["status"] != float64(200) {
		t.Fatalf("access line %v", access)
	}

	var spans map[string]tracingtest.Span
	checkFor(t, 60*time.Second, 100*time.Millisecond, func() error { // the batch goes out within 5 s
		if err := col.Err(); err != nil {
			t.Fatal(err)
		}
		spans = map[string]tracingtest.Span{}
		for _, s := range col.Spans() {
			if s.TraceID == traceID {
				spans[s.Name] = s
			}
		}
		if len(spans) < 6 {
			return fmt.Errorf("the collector has %d spans of the client's trace: %v", len(spans), spans)
		}
		return nil
	})
	root, ok := spans["POST /v1/completions"]
	if !ok || root.ParentSpanID != clientSpan || root.Service != "kvgate" || root.Kind != 2 {
		t.Fatalf("request span %+v: want a server span of service kvgate, child of the client's %s", root, clientSpan)
	}
	if root.Attributes["gen_ai.request.model"] != model || root.Attributes["kvgate.engine"] != "bridged-0" ||
		root.Attributes["gen_ai.usage.output_tokens"] != "4" || root.Attributes["http.response.status_code"] != "200" {
		t.Fatalf("request span attributes %v", root.Attributes)
	}
	for _, name := range []string{"parse", "tokenize", "route", "engine", "stream"} {
		if s, ok := spans[name]; !ok || s.ParentSpanID != root.SpanID {
			t.Fatalf("%s span %+v is not the request span's child", name, s)
		}
	}
	want := "00-" + traceID + "-" + spans["engine"].SpanID + "-01"
	if got := engine.traceparents(path); len(got) != 1 || got[0] != want {
		t.Fatalf("the engine's requests carried traceparent %v, want [%s] (kvgate's engine span)", got, want)
	}
	if got := engine.header(path, "tracestate"); got != "client=e2e" {
		t.Fatalf("the engine's request carried tracestate %q", got)
	}
}

// TestTraceToSimEngines: without tracing, kvgate still hands the client's
// traceparent to its engines over the wire protocol, unchanged, and the
// kvgate-sim engines accept it.
func TestTraceToSimEngines(t *testing.T) {
	sim := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", "sim-traced", "--model", model, "--profile", "zero", "--log-level", "debug")
	addr := sim.waitLog(t, "kvgate-sim serving")["addr"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	tp := "00-" + randomHex(16) + "-" + randomHex(8) + "-01"
	b := []byte(`{"model":"` + model + `","prompt":"Tracing to the simulator.","max_tokens":2}`)
	req, _ := http.NewRequest("POST", base+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := sim.waitLog(t, "traced request")["traceparent"]; got != tp {
		t.Fatalf("the engine was sent traceparent %v, want the client's %s", got, tp)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	b[0] |= 1 // never all zero
	return hex.EncodeToString(b)
}

// headerProxy is the engine's HTTP address as the bridge sees it: a
// reverse proxy to the fake engine that keeps the headers of each
// request, by path.
type headerProxy struct {
	URL string
	mu  sync.Mutex
	got map[string][]http.Header
}

func newHeaderProxy(t *testing.T, target string) *headerProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &headerProxy{got: map[string][]http.Header{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got[r.URL.Path] = append(p.got[r.URL.Path], r.Header.Clone())
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// traceparents are the traceparent headers of the requests to path.
func (p *headerProxy) traceparents(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, h := range p.got[path] {
		out = append(out, h.Get("traceparent"))
	}
	return out
}

// header is the last request to path's header name.
func (p *headerProxy) header(path, name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.got[path]
	if len(hs) == 0 {
		return ""
	}
	return hs[len(hs)-1].Get(name)
}
