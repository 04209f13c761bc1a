package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// TestHistoryBounded: the history keeps the last n samples, oldest first,
// however many are added, and counts them all.
func TestHistoryBounded(t *testing.T) {
	for _, c := range []struct{ keep, add int }{{3, 0}, {3, 2}, {3, 3}, {3, 7}, {1, 5}} {
		h := NewHistory(c.keep)
		for i := range c.add {
			h.Add(Sample{At: int64(i)})
		}
		got, taken := h.Samples()
		if taken != uint64(c.add) || len(got) != min(c.keep, c.add) {
			t.Fatalf("keep %d add %d: %d samples, %d taken", c.keep, c.add, len(got), taken)
		}
		for i, s := range got {
			if want := int64(c.add - len(got) + i); s.At != want {
				t.Fatalf("keep %d add %d: sample %d at %d, want %d", c.keep, c.add, i, s.At, want)
			}
		}
	}
}

// TestStatusDocument: the page's document sums an engine's blocks over its
// ranks, per tier, keeps its load and LOAD report, and carries the samples.
func TestStatusDocument(t *testing.T) {
	st := &State{Policy: "kv", Engines: []EngineState{
		{Addr: "a:1", Kind: KindWire, ID: "eng-a", State: "ready", Inflight: syncring.Load{Requests: 2, PrefillTokens: 30},
			ReportedLoad: &wire.Load{Running: 4, Waiting: 1}},
		{Addr: "b:1", Kind: KindWire, State: "down"},
	}, Index: IndexState{Engines: []IndexEngine{
		{Engine: "a:1", Rank: 0, Blocks: [kvstore.NumTiers]uint64{10, 2, 0}},
		{Engine: "a:1", Rank: 1, Blocks: [kvstore.NumTiers]uint64{5, 0, 1}, ApproxBlocks: 3},
		{Engine: "b:1", Blocks: [kvstore.NumTiers]uint64{7}},
	}}}
	tokens := map[string]Tokens{"a:1": {Prompt: 200, Cached: 150}}
	h := NewHistory(10)
	h.Add(sampleOf(st, tokens, time.UnixMilli(1000)))
	doc := statusOf(st, tokens, h, 2*time.Second, time.UnixMilli(2000))
	a, b := doc.Engines[0], doc.Engines[1]
	if a.Blocks != [kvstore.NumTiers]uint64{15, 2, 1} || a.ApproxBlocks != 3 || a.Running != 4 || a.Waiting != 1 || a.Inflight.Requests != 2 {
		t.Fatalf("engine a: %+v", a)
	}
	if a.PromptTokens != 200 || a.CachedTokens != 150 || a.HitRate != 0.75 {
		t.Fatalf("engine a's tokens: %+v", a)
	}
	if b.Blocks[kvstore.TierGPU] != 7 || b.Running != -1 || b.HitRate != -1 {
		t.Fatalf("engine b: %+v", b)
	}
	want := Sample{At: 1000, Ready: 1, Requests: 2, PrefillTokens: 30, GPUBlocks: 22, PromptTokens: 200, CachedTokens: 150}
	if doc.SamplesTaken != 1 || len(doc.Samples) != 1 || doc.Samples[0] != want || doc.SampleEveryMs != 2000 || doc.Now != 2000 {
		t.Fatalf("samples: %+v taken %d every %d", doc.Samples, doc.SamplesTaken, doc.SampleEveryMs)
	}
}

// TestStatusEndpoints: /status is one self-contained HTML page (nothing
// loaded from elsewhere) that polls status.json, which answers the
// document.
func TestStatusEndpoints(t *testing.T) {
	s := NewServer(prometheus.NewRegistry())
	h := NewHistory(4)
	st := &State{Policy: "kv", Engines: []EngineState{{Addr: "a:1", Kind: KindWire, State: "ready"}}}
	h.Add(sampleOf(st, nil, time.Now()))
	s.MountStatus(StatusSource{State: func() *State { return st }}, h, time.Second)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, page := get("/status")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(page, `fetch("status.json"`) {
		t.Fatalf("/status: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, external := range []string{"http://", "https://", "src=", "<link"} {
		if strings.Contains(page, external) {
			t.Fatalf("/status refers to something outside it: %q", external)
		}
	}
	resp, body := get("/status.json")
	var doc Status
	if err := json.Unmarshal([]byte(body), &doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/status.json: %d %v %s", resp.StatusCode, err, body)
	}
	if len(doc.Engines) != 1 || doc.Engines[0].Addr != "a:1" || doc.SamplesTaken != 1 || doc.Policy != "kv" {
		t.Fatalf("/status.json: %s", body)
	}
}

// TestTokenCounts: the gateway's per-engine counters are read by their
// engine label, and give each engine's hit rate.
func TestTokenCounts(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	prompt := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricEnginePrompt, Help: "p"}, []string{"engine"})
	cached := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricEngineCached, Help: "c"}, []string{"engine"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "kvgate_other_total", Help: "o"})
	reg.MustRegister(prompt, cached, other)
	prompt.WithLabelValues("a:1").Add(100)
	cached.WithLabelValues("a:1").Add(25)
	prompt.WithLabelValues("b:1").Add(10)
	cached.WithLabelValues("b:1").Add(0)
	other.Add(7)
	got := TokenCounts(reg)
	if len(got) != 2 || got["a:1"] != (Tokens{Prompt: 100, Cached: 25}) || got["a:1"].HitRate() != 0.25 || got["b:1"].HitRate() != 0 {
		t.Fatalf("token counts %v", got)
	}
	if len(TokenCounts(nil)) != 0 || (Tokens{}).HitRate() != -1 {
		t.Fatal("no registry, or no prompt tokens, gives a hit rate")
	}
}
