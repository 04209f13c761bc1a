package gateway

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// completionRequestAllocs bounds BenchmarkCompletionRequest's allocations:
// one non-streamed 1-token completion through the whole process (client,
// httpx, gateway, engine connection and the two simulated engines).
// 49 at a1ab90f, 43 after the gateway's own were cut, 29 at d38fc88
// (httpx, engine and simulator work), 27 once GENERATE's model name came
// from the engine's handshake (Engine.ResolveWire), 23 with the GENERATE,
// routing request and output in the request's allocation and the
// detokenizer kept with the pooled attempt, 21 with a pooled encoder's
// body text kept and a whole response's text not copied for its parser,
// 19 with the request's first header fields and its response's writer in
// the request's allocation (httpx), 17 with the gateway's request state
// (its encoder, body buffer and prompt ids' room) pooled (genpool.go), 16
// with the response's id in that state's room.
const completionRequestAllocs = 17

// completion16Allocs bounds BenchmarkCompletionRequest16's: the same
// request with 16 tokens, whose prompt and output fill a KV block, so the
// engines send KV events for it. 24 at bb6bf80, 22 with an EVENTS frame's
// conversion for the index in the read loop's kept room (kvevents.go).
const completion16Allocs = 23

// TestCompletionRequestAllocs holds a request's allocations, the whole
// process's, under completionRequestAllocs (1 token) and
// completion16Allocs (16): a change that adds some back fails here, not
// only in a benchmark nobody reads.
func TestCompletionRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	for _, c := range []struct{ tokens, max int }{{1, completionRequestAllocs}, {16, completion16Allocs}} {
		roundTrip := completionClientOf(t, c.tokens)
		n := testing.AllocsPerRun(300, roundTrip)
		t.Logf("%d tokens: %v allocations per request", c.tokens, n)
		if n > float64(c.max) {
			t.Errorf("%d tokens: %v allocations per request, over %d", c.tokens, n, c.max)
		}
	}
}

// TestRequestStepAllocs holds the gateway's own steps of a plain
// completion to their allocations: its prompt's ids one (growing from nil
// was 4 for 12 tokens), its output parser and stop matcher none (shared),
// its metrics none once their children are resolved.
func TestRequestStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	req, mod := &api.Request{Kind: api.Completion}, &Model{Tok: tok}
	steps := []struct {
		name string
		max  float64
		step func()
	}{
		{"prompt ids", 1, func() {
			_, _, _ = encodeBounded(nil, tok, "Hello, how are you today? Tell me about routers.", true, 1000)
		}},
		{"output parser", 0, func() { parserKept = outputParser(mod, req, "") }},
		{"stop matcher", 0, func() { stopsKept = api.NewStopMatcher(nil) }},
		{"metrics", 0, func() {
			m.observeRequest("/v1/completions", 200, time.Millisecond)
			m.observeFirstToken("127.0.0.1:1", 12, time.Millisecond, 0, 0)
		}},
	}
	for _, s := range steps {
		s.step() // warm: caches, the metrics' children
		if n := testing.AllocsPerRun(100, s.step); n > s.max {
			t.Errorf("%s: %v allocations, want at most %v", s.name, n, s.max)
		}
	}
}

// stopsKept and parserKept keep what a step returned, as an attempt does:
// escaping, it must be counted.
var (
	stopsKept  *api.StopMatcher
	parserKept *api.OutputParser
)
