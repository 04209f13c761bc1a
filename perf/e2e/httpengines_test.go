//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingHTTPEngine is an OpenAI-compatible engine that answers every
// completion with a small fixed body and counts them.
func countingHTTPEngine(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"cmpl-x","object":"text_completion","choices":[{"text":"ok","index":0}]}`)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, &n
}

// TestPassthroughSpreadsAndSticks: kvgate in front of two equal HTTP
// engines sends sequential requests with new prompts to both (near-ties
// are broken at random, as for wire engines) and a repeated long prompt
// to one; /debug/state lists both engines and the engine metrics have a
// series for each, by URL.
func TestPassthroughSpreadsAndSticks(t *testing.T) {
	a, na := countingHTTPEngine(t)
	b, nb := countingHTTPEngine(t)
	_, base := startKvgate(t, "--http-engine", a.URL+","+b.URL, "--steering", "copy")
	waitReady(t, base)
	complete := func(prompt string) {
		t.Helper()
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 1})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	const n = 40
	for i := range n {
		complete(fmt.Sprintf("New prefix %d: %s", i, strings.Repeat("a fresh question about something else ", 20)))
	}
	// Binomial(40, 1/2): fewer than 8 is more than 3.7 standard deviations off.
	if na.Load() < 8 || nb.Load() < 8 {
		t.Fatalf("%d new prompts: %d to one engine, %d to the other", n, na.Load(), nb.Load())
	}
	before := [2]int64{na.Load(), nb.Load()}
	long := strings.Repeat("The same long shared prefix of a conversation. ", 60)
	for range 10 {
		complete(long)
	}
	if da, db := na.Load()-before[0], nb.Load()-before[1]; da != 10 && db != 10 {
		t.Fatalf("a repeated prompt went %d times to one engine and %d to the other, want all 10 to one", da, db)
	}

	// The last response reached this client a moment before kvgate
	// released its load: wait for the release.
	admin := adminOf(t, base)
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := http.Get(admin + "/debug/state")
		if err != nil {
			return err
		}
		defer r.Body.Close()
		var st struct {
			Engines []struct {
				Addr     string   `json:"addr"`
				Kind     string   `json:"kind"`
				State    string   `json:"state"`
				Models   []string `json:"models"`
				Inflight struct{ PrefillTokens, Requests int }
			} `json:"engines"`
		}
		if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
			return err
		}
		if len(st.Engines) != 2 {
			return fmt.Errorf("/debug/state engines %+v, want the two HTTP engines", st.Engines)
		}
		for i, url := range []string{a.URL, b.URL} {
			e := st.Engines[i]
			if e.Addr != url || e.Kind != "http" || e.State != "ready" || len(e.Models) != 1 || e.Models[0] != model ||
				e.Inflight.PrefillTokens != 0 || e.Inflight.Requests != 0 {
				return fmt.Errorf("/debug/state engine %d: %+v, want %s, http, ready, serving %s, nothing in flight", i, e, url, model)
			}
		}
		return nil
	})
	for _, url := range []string{a.URL, b.URL} {
		waitMetric(t, admin, `kvgate_engine_ready{engine="`+url+`"}`, " 1")
		waitMetric(t, admin, `kvgate_engine_inflight_prefill_tokens{engine="`+url+`"}`, " 0")
		waitMetric(t, admin, `kvgate_engine_inflight_requests{engine="`+url+`"}`, " 0")
		waitMetric(t, admin, `kvgate_http_engine_ready{engine="`+url+`"}`, " 1")
	}
}
