package vllm_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// TestGenerateNamesTheRank: a GENERATE's data-parallel rank reaches vLLM
// as its X-data-parallel-rank header when the engine has ranks behind one
// API server; "any rank" and an engine of one rank send none; a rank the
// engine does not have is refused before anything is sent.
func TestGenerateNamesTheRank(t *testing.T) {
	got := make(chan string, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		v, ok := r.Header[http.CanonicalHeaderKey(vllm.DPRankHeader)]
		if !ok {
			v = []string{"none"}
		}
		got <- v[0]
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"token_ids":[42],"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	cases := []struct {
		name   string
		ranks  int
		rank   uint16
		header string // "": refused
	}{
		{"rank 2 of 4", 4, 2, "2"},
		{"rank 0 of 4", 4, 0, "0"},
		{"any rank of 4", 4, wire.AnyRank, "none"},
		{"rank 4 of 4", 4, 4, ""},
		{"rank 0 of 1", 1, 0, "none"},
		{"rank 1 of 1", 1, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := slog.New(slog.DiscardHandler)
			e := vllm.NewEngine(hs.URL, "m", nil, log)
			e.DPRanks = tc.ranks
			b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), tc.ranks, 100)
			srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4,
				DPRanks: uint16(tc.ranks), Models: []string{"m"}}, Logger: log}, b)
			e.Out = srv
			c := servetest.Router(t, srv)
			if err := c.Send(1, &wire.Generate{Model: []byte("m"), MaxTokens: 1, TopP: 1, DPRank: tc.rank, Prompt: wire.TokensOf([]uint32{1, 2, 3})}); err != nil {
				t.Fatal(err)
			}
			f := next(t, c, 1)
			if tc.header == "" {
				var m wire.Error
				if f.Type != wire.TypeError || wire.DecodeFrame(f, &m, nil) != nil || m.Code != wire.CodeBadRequest {
					t.Fatalf("got %s, want ERROR bad request", f.Type)
				}
				select {
				case h := <-got:
					t.Fatalf("a refused rank reached the engine (%q)", h)
				default:
				}
				return
			}
			if f.Type != wire.TypeTokens {
				t.Fatalf("got %s, want TOKENS", f.Type)
			}
			if h := <-got; h != tc.header {
				t.Fatalf("%s: %q, want %q", vllm.DPRankHeader, h, tc.header)
			}
		})
	}
}

// TestExternalRankMetrics: a bridge in front of rank 2 of an external-DP
// deployment reports rank 2's series as its rank 0, or the only rank a
// server labels otherwise; the internal layout keeps every rank.
func TestExternalRankMetrics(t *testing.T) {
	r0, r2 := &vllm.EngineMetrics{Running: 1}, &vllm.EngineMetrics{Running: 3}
	both := map[int]*vllm.EngineMetrics{0: r0, 2: r2}
	if got := vllm.ExternalRankMetrics(both, 0); len(got) != 2 || got[2] != r2 {
		t.Fatalf("first rank 0: %v", got)
	}
	if got := vllm.ExternalRankMetrics(both, 2); len(got) != 1 || got[0] != r2 {
		t.Fatalf("first rank 2: %v", got)
	}
	if got := vllm.ExternalRankMetrics(map[int]*vllm.EngineMetrics{0: r0}, 2); len(got) != 1 || got[0] != r0 {
		t.Fatalf("only rank, labelled 0: %v", got)
	}
	if got := vllm.ExternalRankMetrics(both, 3); got != nil {
		t.Fatalf("rank 3 of ranks 0 and 2: %v", got)
	}
	loads := vllm.Loads(vllm.ExternalRankMetrics(both, 2), 1, 100, 16)
	if len(loads) != 1 || loads[0].DPRank != 0 || loads[0].Running != 3 {
		t.Fatalf("LOAD %+v", loads)
	}
}
