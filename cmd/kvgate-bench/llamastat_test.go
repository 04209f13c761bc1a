package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/report"
)

// fakeLlama answers /slots, /metrics and slot erases as llama-server
// (tools/server/server-context.cpp at 80fb11ac) does: a slot never used
// has only id, n_ctx and is_processing; erasing without --slot-save-path
// is 501.
type fakeLlama struct {
	mu             sync.Mutex
	held           []int // tokens each slot holds; -1: never used
	keep           bool  // an erase leaves the slot as it was
	noSavePath     bool
	prompt, cached int
	erases         []string
}

func (f *fakeLlama) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/slots":
		var parts []string
		for i, n := range f.held {
			if n < 0 {
				parts = append(parts, fmt.Sprintf(`{"id":%d,"n_ctx":2048,"speculative":false,"is_processing":false}`, i))
				continue
			}
			parts = append(parts, fmt.Sprintf(`{"id":%d,"n_ctx":2048,"is_processing":false,"id_task":7,"n_prompt_tokens":%d,`+
				`"n_prompt_tokens_processed":0,"n_prompt_tokens_cache":0,"next_token":[{"n_decoded":0}]}`, i, n))
		}
		fmt.Fprintf(w, "[%s]", strings.Join(parts, ","))
	case r.Method == http.MethodGet && r.URL.Path == "/metrics":
		fmt.Fprintf(w, "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total %d\n"+
			"llamacpp:prompt_tokens_cached_total %d\nllamacpp:requests_processing 0\n", f.prompt, f.cached)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/slots/"):
		if f.noSavePath {
			w.WriteHeader(http.StatusNotImplemented)
			fmt.Fprint(w, `{"error":{"code":501,"message":"This server does not support slots action. Start it with `+"`--slot-save-path`"+`","type":"not_supported_error"}}`)
			return
		}
		var id int
		fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/slots/"), "%d", &id)
		f.erases = append(f.erases, r.URL.Path+"?"+r.URL.RawQuery)
		n := max(f.held[id], 0)
		if !f.keep && f.held[id] >= 0 {
			f.held[id] = 0
		}
		fmt.Fprintf(w, `{"id_slot":%d,"n_erased":%d}`, id, n)
	default:
		http.NotFound(w, r)
	}
}

func startFake(t *testing.T, f *fakeLlama) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		llamaClient.CloseIdleConnections()
		srv.Close()
	})
	return srv.URL
}

func TestFlushLlamaCpp(t *testing.T) {
	cases := []struct {
		name    string
		fakes   []*fakeLlama
		want    flushReport
		wantErr string
		noErase bool
	}{
		{name: "erases every slot", fakes: []*fakeLlama{{held: []int{100, -1}}, {held: []int{30, 40}}},
			want: flushReport{Slots: 4, ErasedTokens: 170}},
		{name: "fresh servers", fakes: []*fakeLlama{{held: []int{-1, -1}}}, want: flushReport{Slots: 2}},
		{name: "no --slot-save-path", fakes: []*fakeLlama{{held: []int{5}, noSavePath: true}}, noErase: true},
		{name: "erase without effect", fakes: []*fakeLlama{{held: []int{5}, keep: true}}, wantErr: "still holds 5 tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var urls []string
			for _, f := range c.fakes {
				urls = append(urls, startFake(t, f))
			}
			got, err := flushLlamaCpp(context.Background(), urls)
			switch {
			case c.noErase:
				if !errors.Is(err, ErrNoErase) {
					t.Fatalf("err = %v, want ErrNoErase", err)
				}
				return
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if *got != c.want {
				t.Errorf("flush = %+v, want %+v", *got, c.want)
			}
			for _, f := range c.fakes {
				for i, e := range f.erases {
					if want := fmt.Sprintf("/slots/%d?action=erase", i); e != want {
						t.Errorf("erase %d = %s, want %s", i, e, want)
					}
				}
			}
		})
	}
}

func TestEngineCounters(t *testing.T) {
	a, b := &fakeLlama{prompt: 1000, cached: 200}, &fakeLlama{prompt: 50}
	urls := []string{startFake(t, a), startFake(t, b)}
	before, err := readCounters(context.Background(), urls)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.prompt, a.cached = 1600, 2600 // computed 600, reused 2,400
	a.mu.Unlock()
	b.mu.Lock()
	b.prompt, b.cached = 250, 800 // computed 200, reused 800
	b.mu.Unlock()
	after, err := readCounters(context.Background(), urls)
	if err != nil {
		t.Fatal(err)
	}
	var r engineRun
	r.difference(urls, before, after)
	if r.PromptTokens != 800 || r.CachedTokens != 3200 || r.HitRate != 0.8 || r.Imbalance != 1.5 {
		t.Errorf("run = %+v, want 800 computed, 3200 cached, hit 0.8, imbalance 1.5", r)
	}
	if r.Servers[1] != (serverRun{URL: urls[1], PromptTokens: 200, CachedTokens: 800}) {
		t.Errorf("server 1 = %+v", r.Servers[1])
	}
}

func TestEngineTableRatios(t *testing.T) {
	res := func(p50, p99, hit float64) *loadgen.Result {
		return &loadgen.Result{Requests: 10, TTFT: loadgen.Summary{P50: p50, P99: p99}, PrefixHitRate: hit}
	}
	c := &comparison{Comparison: &report.Comparison{Order: []string{"kv", "round-robin"},
		Policies: map[string]*loadgen.Result{"kv": res(100, 400, 0.7), "round-robin": res(300, 1000, 0.2)}},
		EngineCounters: map[string]*engineRun{"kv": {HitRate: 0.75, CPU: &cpuShare{CPUs: 2, Others: 0.5}}, "round-robin": {HitRate: 0.25}}}
	table := c.engineTable()
	for _, want := range []string{
		"| kv | 10 | 0 | 100 | 400 | 0.750 | 0.700 | 3.00x | 2.50x | 3.00x | 0.50 of 2 |",
		"| round-robin | 10 | 0 | 300 | 1000 | 0.250 | 0.200 | 1.00x | 1.00x | 1.00x | n/a |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestWaitSettled(t *testing.T) {
	var mu sync.Mutex
	state := `{"engines":[{"addr":"a","id":"e0","state":"ready"},{"addr":"b","id":"e1","state":"connecting"}],"index":{"entries":3}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, state)
	}))
	defer srv.Close()
	if _, err := waitSettled(context.Background(), srv.URL, 2, false, 150*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), "1 of 2 engines ready") {
		t.Fatalf("one engine connecting: err = %v", err)
	}
	mu.Lock()
	state = strings.Replace(state, "connecting", "ready", 1)
	mu.Unlock()
	if _, err := waitSettled(context.Background(), srv.URL, 2, true, 150*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), "3 index entries") {
		t.Fatalf("index not empty after a flush: err = %v", err)
	}
	ids, err := waitSettled(context.Background(), srv.URL, 2, false, time.Second)
	if err != nil || strings.Join(ids, ",") != "e0,e1" {
		t.Fatalf("ids = %v, err = %v", ids, err)
	}
}

func TestCompareFlagsRefused(t *testing.T) {
	var stderr strings.Builder
	err := cmdCompare(context.Background(), []string{"--llamacpp", "http://127.0.0.1:1", "--workload", "multi-turn:sessions=1,turns=1",
		"--kvgate", "/bin/true"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--engine-addrs or --http-engines") {
		t.Fatalf("--llamacpp alone: err = %v", err)
	}
}
