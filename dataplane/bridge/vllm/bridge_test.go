package vllm_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// startBridge serves a bridge in front of the engine at url on loopback and
// returns a router connection to it.
func startBridge(t *testing.T, url string) (*vllm.Bridge, *wire.Conn) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e := vllm.NewEngine(url, "m", map[uint32]string{1: "sql", 2: "nope"}, log)
	b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), 1, 100)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4, Models: []string{"m"}}, Logger: log}, b)
	e.Out = srv
	return b, servetest.Router(t, srv)
}

// next reads frames until one on stream (TOKENS or ERROR).
func next(t *testing.T, c *wire.Conn, stream uint32) wire.Frame {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Stream == stream {
			return f
		}
	}
}

// TestEngineStreamsAndCancels: a GENERATE reaches the engine as a token-id
// completion with the router's sampling parameters; tokens come back as
// TOKENS, with usage and the cached tokens of vLLM's final usage chunk on
// the last frame; CANCEL aborts the HTTP request; an
// HTTP error becomes the stream's ERROR with a fitting code.
func TestEngineStreamsAndCancels(t *testing.T) {
	aborted := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var body strings.Builder
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		body.Write(buf[:n])
		switch {
		case strings.Contains(body.String(), `"model":"nope"`):
			http.Error(w, "no such model", http.StatusNotFound)
		case strings.Contains(body.String(), `"max_tokens":1000`): // stream until cancelled
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"token_ids\":[%d],\"finish_reason\":null}]}\n\n", i); err != nil {
					break
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					close(aborted)
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		default:
			if !strings.Contains(body.String(), `"prompt":[1,2,3,4,5]`) || !strings.Contains(body.String(), `"return_token_ids":true`) ||
				!strings.Contains(body.String(), `"seed":7`) || !strings.Contains(body.String(), `"model":"sql"`) {
				http.Error(w, "unexpected body "+body.String(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			// As vLLM streams with continuous_usage_stats: counts in every
			// chunk, cached_tokens only in the final usage chunk
			// (completion/serving.py at 030ea52e).
			fmt.Fprint(w, `data: {"choices":[{"token_ids":[42],"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`+"\n\n")
			fmt.Fprint(w, `data: {"choices":[{"token_ids":[43],"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`+"\n\n")
			fmt.Fprint(w, `data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":4}}}`+"\n\ndata: [DONE]\n\n")
		}
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	_, c := startBridge(t, hs.URL)

	g := &wire.Generate{Model: []byte("m"), LoRAID: 1, MaxTokens: 2, Seed: 7, Flags: wire.GenHasSeed, TopP: 1, Prompt: wire.TokensOf([]uint32{1, 2, 3, 4, 5})}
	if err := c.Send(1, g); err != nil {
		t.Fatal(err)
	}
	var got []uint32
	var first, last wire.TokensMsg
	for {
		f := next(t, c, 1)
		if f.Type != wire.TypeTokens {
			t.Fatalf("stream 1: %s", f.Type)
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		got = m.Tokens.AppendTo(got)
		if m.First() {
			first = m
		}
		if m.Last() {
			last = m
			break
		}
	}
	if fmt.Sprint(got) != "[42 43]" || last.CachedTokens != 4 || last.Finish != wire.FinishLength || last.PromptTokens != 5 || last.CompletionTokens != 2 {
		t.Fatalf("tokens %v first %+v last %+v", got, first, last)
	}

	// CANCEL aborts the HTTP request; the stream ends as cancelled.
	long := *g
	long.LoRAID, long.MaxTokens = 0, 1000
	if err := c.Send(3, &long); err != nil {
		t.Fatal(err)
	}
	next(t, c, 3)
	if err := c.Send(3, &wire.Cancel{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aborted:
	case <-time.After(20 * time.Second):
		t.Fatal("CANCEL did not abort the engine's HTTP request")
	}
	for {
		f := next(t, c, 3)
		var m wire.TokensMsg
		if f.Type == wire.TypeTokens && wire.DecodeFrame(f, &m, nil) == nil && m.Last() {
			if m.Finish != wire.FinishCancelled {
				t.Fatalf("cancelled stream finished %v", m.Finish)
			}
			break
		}
	}

	// Refusals: an unknown model before the engine is asked, an engine 404.
	bad := *g
	bad.Model = []byte("other")
	if err := c.Send(5, &bad); err != nil {
		t.Fatal(err)
	}
	var e wire.Error
	if f := next(t, c, 5); f.Type != wire.TypeError || wire.DecodeFrame(f, &e, nil) != nil || e.Code != wire.CodeUnknownModel {
		t.Fatalf("unknown model: %s %+v", f.Type, e)
	}
	gone := *g
	gone.LoRAID = 2 // the engine answers 404 for this adapter
	if err := c.Send(7, &gone); err != nil {
		t.Fatal(err)
	}
	if f := next(t, c, 7); f.Type != wire.TypeError || wire.DecodeFrame(f, &e, nil) != nil || e.Code != wire.CodeUnknownModel {
		t.Fatalf("engine 404: %s %+v", f.Type, e)
	}
}

// TestMetricsToLoad reads vLLM's and SGLang's metric names into LOAD.
func TestMetricsToLoad(t *testing.T) {
	text := `# HELP vllm:num_requests_running x
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="4000",prefix="a,b"} 1.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
sglang:num_queue_reqs{engine="1"} 6
`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, text) }))
	defer hs.Close()
	m, err := vllm.ScrapeMetrics(context.Background(), http.DefaultClient, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	loads := vllm.Loads(m, 2, 100, 16)
	if l := loads[0]; l.Running != 3 || l.Waiting != 2 || len(l.Tiers) != 1 || l.Tiers[0].Total != 4000 || l.Tiers[0].Used != 1000 {
		t.Fatalf("rank 0: %+v", l)
	}
	if l := loads[1]; l.Running != 1 || l.Waiting != 6 || l.Tiers[0].Total != 100 || l.DPRank != 1 {
		t.Fatalf("rank 1: %+v", l)
	}
}
