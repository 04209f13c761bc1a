//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeHTTPEngine is an OpenAI-compatible engine with nothing beside it:
// deterministic answers (a body of max_tokens*1000 bytes, or that many SSE
// events), and a prompt containing RESET makes it reset the connection
// halfway through the body.
func fakeHTTPEngine(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
			Stream    bool   `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		text := strings.Repeat(fmt.Sprintf("[%s|%d]", req.Prompt[:min(8, len(req.Prompt))], req.MaxTokens), 1+req.MaxTokens*1000/16)
		if strings.Contains(req.Prompt, "RESET") {
			hj, _ := w.(http.Hijacker)
			c, buf, _ := hj.Hijack()
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(text)*2, text)
			buf.Flush()
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
			return
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			b, _ := json.Marshal(map[string]any{"id": "cmpl-x", "object": "text_completion", "choices": []any{map[string]any{"text": text, "index": 0}}})
			_, _ = w.Write(b)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range req.MaxTokens {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"%d-%s\"}]}\n\n", i, text[:min(64, len(text))])
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestPassthroughSteering: kvgate in front of an HTTP engine (no wire
// protocol, nothing beside the engine) in each steering mode: responses of
// many sizes, streamed and whole, on keep-alive client connections and in
// parallel, arrive byte for byte as the engine sends them; an engine reset
// mid-body fails that response only.
func TestPassthroughSteering(t *testing.T) {
	engine := fakeHTTPEngine(t)
	for _, mode := range []string{"sockmap", "splice", "copy"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "sockmap" {
				requireSockmap(t)
			}
			p, base := startKvgate(t, "--http-engine", engine.URL, "--steering", mode)
			_ = p
			waitReady(t, base)
			client := &http.Client{Timeout: 60 * time.Second}
			ask := func(target string, body map[string]any) ([]byte, error) {
				b, _ := json.Marshal(body)
				resp, err := client.Post(target+"/v1/completions", "application/json", bytes.NewReader(b))
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				return io.ReadAll(resp.Body)
			}
			check := func(body map[string]any) error {
				want, err := ask(engine.URL, body)
				if err != nil {
					return err
				}
				got, err := ask(base, body)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%v: %d bytes through kvgate, %d from the engine", body, len(got), len(want))
				}
				return nil
			}
			for i, n := range []int{1, 16, 200, 3000} {
				for _, stream := range []bool{false, true} {
					if err := check(map[string]any{"model": model, "prompt": fmt.Sprintf("request %d", i), "max_tokens": n, "stream": stream}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for k := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := check(map[string]any{"model": model, "prompt": fmt.Sprintf("parallel %d", k), "max_tokens": 500 + k, "stream": k%2 == 0}); err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if b, err := ask(base, map[string]any{"model": model, "prompt": "RESET please", "max_tokens": 2000}); err == nil {
				t.Fatalf("a response the engine reset arrived whole (%d bytes)", len(b))
			}
			if err := check(map[string]any{"model": model, "prompt": "after the reset", "max_tokens": 100}); err != nil {
				t.Fatal(err)
			}
			waitCut(t, adminOf(t, base), engine.URL)
			waitMetric(t, adminOf(t, base), `kvgate_steering_mode{mode="`+mode+`"}`, " 1")
			waitMetric(t, adminOf(t, base), `kvgate_http_engine_ready{engine="`+engine.URL+`"}`, " 1")
		})
	}
}

// waitCut waits until the cut-response counters of an engine add up to at
// least one. (A client that leaves once it has a chunked response, before
// the engine closes, is counted too, so the reset is not the only one.)
func waitCut(t *testing.T, admin, engine string) {
	t.Helper()
	prefix := `kvgate_http_responses_cut_total{engine="` + engine + `"`
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := http.Get(admin + "/metrics")
		if err != nil {
			return fmt.Errorf("no cut response counted for %s: %v", engine, err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		sum := 0.0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, prefix) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				sum += v
			}
		}
		if sum < 1 {
			return fmt.Errorf("no cut response counted for %s", engine)
		}
		return nil
	})
}
