package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/workload"
)

// fakeServer streams an OpenAI completion: a first token after firstDelay,
// then more every gap, and usage with cached tokens; engine names alternate.
func fakeServer(firstDelay, gap time.Duration, tokens int) *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-kvgate-engine", fmt.Sprintf("e%d", n.Add(1)%2))
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		// Not synchronisation: the sleeps are the engine's prefill and
		// decode time, which the test measures TTFT and ITL against.
		time.Sleep(firstDelay)
		for i := range tokens {
			if i > 0 {
				time.Sleep(gap)
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			fl.Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":25}}}\n\n", tokens)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
}

func TestRunMeasures(t *testing.T) {
	srv := fakeServer(30*time.Millisecond, 5*time.Millisecond, 4)
	defer srv.Close()
	wl := &workload.Workload{Spec: "test"}
	for i := range 10 {
		wl.Requests = append(wl.Requests, workload.Request{At: time.Duration(i) * 10 * time.Millisecond, Prompt: make([]uint32, 100), Output: 4})
	}
	res, err := Run(context.Background(), Options{Target: srv.URL, Model: "m"}, wl)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case res.Requests != 10 || res.Errors != 0:
		t.Fatalf("%d ok, %d errors: %v", res.Requests, res.Errors, res.FirstErrors)
	case res.TTFT.P50 < 30:
		t.Fatalf("TTFT p50 %.1f ms, the server waits 30 ms", res.TTFT.P50)
	case res.ITL.P50 < 4:
		t.Fatalf("ITL p50 %.1f ms, the server waits 5 ms", res.ITL.P50)
	case res.PrefixHitRate != 0.25:
		t.Fatalf("hit rate %v, want 0.25", res.PrefixHitRate)
	case len(res.Engines) != 2 || res.Engines["e0"].Requests+res.Engines["e1"].Requests != 10:
		t.Fatalf("engines %+v", res.Engines)
	case len(res.Load) == 0:
		t.Fatal("no load over time")
	}
}

func TestRunCountsFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error":{"message":"busy"}}`)
	}))
	defer srv.Close()
	wl := &workload.Workload{Requests: []workload.Request{{Prompt: []uint32{1}, Output: 1}, {Prompt: []uint32{2}, Output: 1}}}
	res, err := Run(context.Background(), Options{Target: srv.URL, Model: "m", Concurrency: 1}, wl)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 2 || res.Requests != 0 || len(res.FirstErrors) != 2 {
		t.Fatalf("%+v", res)
	}
}
