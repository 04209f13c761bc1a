package vllm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// startSGLangBridge serves a bridge in front of the SGLang server at url,
// as it describes itself (s nil: read from /get_server_info).
func startSGLangBridge(t *testing.T, url string, s *vllm.SGLangServer) *wire.Conn {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e := vllm.NewEngine(url, "m", nil, log)
	if s == nil {
		var err error
		if s, err = vllm.FetchSGLangServer(context.Background(), e.Client, url); err != nil {
			t.Fatal(err)
		}
	}
	e.SGLang = s
	b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), 1, 100)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4, Models: []string{"m"}}, Logger: log}, b)
	e.Out = srv
	return servetest.Router(t, srv)
}

// streamResult is one stream as the router saw it: its tokens, its first
// and last TOKENS, or its ERROR.
type streamResult struct {
	tokens      []uint32
	first, last wire.TokensMsg
	err         *wire.Error
}

func readStream(t *testing.T, c *wire.Conn, stream uint32) streamResult {
	t.Helper()
	var r streamResult
	for {
		f := next(t, c, stream)
		if f.Type == wire.TypeError {
			r.err = &wire.Error{}
			if err := wire.DecodeFrame(f, r.err, nil); err != nil {
				t.Fatal(err)
			}
			return r
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		r.tokens = m.Tokens.AppendTo(r.tokens)
		if m.First() {
			r.first = m
		}
		if m.Last() {
			r.last = m
			return r
		}
	}
}

// TestSGLangEngineStreams: a GENERATE reaches a fake SGLang as a native
// /generate with input_ids and sampling_params; the ids it streams,
// cumulative or incremental, reach the router once each and in order,
// with cached tokens on the first frame and the finish and usage on the
// last; a prompt past the context length is the stream's ERROR with
// SGLang's message.
func TestSGLangEngineStreams(t *testing.T) {
	for _, incremental := range []bool{false, true} {
		t.Run(fmt.Sprint("incremental=", incremental), func(t *testing.T) {
			var opts []vllmtest.Option
			if incremental {
				opts = append(opts, vllmtest.WithIncrementalStreaming())
			}
			f, err := vllmtest.Start("m", 4, 64, vllmtest.SGLang, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c := startSGLangBridge(t, f.URL, nil)
			prompt := make([]uint32, 40)
			for i := range prompt {
				prompt[i] = uint32(i + 1)
			}
			g := &wire.Generate{Model: []byte("m"), RequestID: []byte("req-1"), MaxTokens: 5, Seed: 7, Flags: wire.GenHasSeed, TopP: 1,
				DPRank: wire.AnyRank, Prompt: wire.TokensOf(prompt)}
			for stream := uint32(1); stream <= 2; stream++ {
				if err := c.Send(stream, g); err != nil {
					t.Fatal(err)
				}
				r := readStream(t, c, stream)
				if r.err != nil {
					t.Fatalf("stream %d: %+v", stream, r.err)
				}
				wantCached := uint32(0)
				if stream == 2 {
					wantCached = 40 // every page of the prompt, from the first request
				}
				if !reflect.DeepEqual(r.tokens, vllmtest.Generated(prompt, 5)) || r.first.CachedTokens != wantCached ||
					r.last.Finish != wire.FinishLength || r.last.PromptTokens != 40 || r.last.CompletionTokens != 5 {
					t.Fatalf("stream %d: tokens %v (want %v), first %+v, last %+v", stream, r.tokens, vllmtest.Generated(prompt, 5), r.first, r.last)
				}
			}
			body := f.Requests()[0].Body
			sp, _ := body["sampling_params"].(map[string]any)
			if body["stream"] != true || body["rid"] != "req-1" || len(body["input_ids"].([]any)) != 40 ||
				sp["max_new_tokens"] != 5.0 || sp["sampling_seed"] != 7.0 || sp["top_k"] != -1.0 || body["data_parallel_rank"] != nil {
				t.Fatalf("the engine got %v", body)
			}

			// Past the context length (the fake's pool, 256 tokens).
			long := *g
			long.RequestID, long.MaxTokens = []byte("req-2"), 300
			if err := c.Send(3, &long); err != nil {
				t.Fatal(err)
			}
			if r := readStream(t, c, 3); r.err == nil || r.err.Code != wire.CodeStreamFailed || !strings.Contains(r.err.Message, "maximum context length of 256") {
				t.Fatalf("past the context length: %+v", r)
			}
		})
	}
}

// TestSGLangEngineRefuses: what the bridge cannot honour on SGLang, or
// SGLang sent inconsistently, ends the stream with an ERROR that says so:
// an adapter; output ids that account for neither all ids so far nor the
// new ones; an abort with a status code; an error before the stream.
func TestSGLangEngineRefuses(t *testing.T) {
	chunk := `data: {"text":"x","output_ids":%s,"meta_info":{"id":"r","finish_reason":%s,"prompt_tokens":2,"completion_tokens":%d,"cached_tokens":0}}` + "\n\n"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			InputIDs []uint32 `json:"input_ids"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.InputIDs[0] == 9 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"The input is empty."}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch body.InputIDs[0] {
		case 1: // two ids, then three ids at three completion tokens
			fmt.Fprintf(w, chunk, "[5,6]", "null", 2)
			fmt.Fprintf(w, chunk, "[5,6,7,8]", "null", 3)
		case 2:
			fmt.Fprintf(w, chunk, "[5]", "null", 1)
			fmt.Fprintf(w, chunk, "[5]", `{"type":"abort","message":"KV cache pool is full","status_code":503}`, 1)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer hs.Close()
	c := startSGLangBridge(t, hs.URL, &vllm.SGLangServer{PageSize: 4, ServedModelName: "m", DPSize: 1})
	for i, want := range []struct {
		g      wire.Generate
		code   wire.ErrorCode
		substr string
	}{
		{wire.Generate{LoRAID: 3, Prompt: wire.TokensOf([]uint32{1})}, wire.CodeUnknownLoRA, "base model only"},
		{wire.Generate{Prompt: wire.TokensOf([]uint32{1, 1})}, wire.CodeStreamFailed, "4 output ids at 3 completion tokens after 2 relayed"},
		{wire.Generate{Prompt: wire.TokensOf([]uint32{2, 2})}, wire.CodeStreamFailed, "aborted the request (503): KV cache pool is full"},
		{wire.Generate{Prompt: wire.TokensOf([]uint32{9})}, wire.CodeBadRequest, "The input is empty."},
	} {
		g := want.g
		g.Model, g.MaxTokens, g.TopP, g.DPRank = []byte("m"), 4, 1, wire.AnyRank
		if err := c.Send(uint32(i+1), &g); err != nil {
			t.Fatal(err)
		}
		if r := readStream(t, c, uint32(i+1)); r.err == nil || r.err.Code != want.code || !strings.Contains(r.err.Message, want.substr) {
			t.Errorf("case %d: %+v, want code %v and %q", i, r.err, want.code, want.substr)
		}
	}
}

// TestSGLangRequestFields: the rank goes as data_parallel_rank to a server
// with DP ranks (none to a server of one, and a rank beyond its --dp-size
// is refused); a priority only to one scheduling by priority, negated
// unless it runs low values first (the wire's order); the cache salt as
// cache_salt.
func TestSGLangRequestFields(t *testing.T) {
	bodies := make(chan map[string]any, 4)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies <- body
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"output_ids":[1],"meta_info":{"finish_reason":{"type":"stop","matched":1},"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer hs.Close()
	for _, c := range []struct {
		server vllm.SGLangServer
		rank   uint16
		want   string // "": refused
	}{
		{vllm.SGLangServer{DPSize: 2, PriorityScheduling: true}, 1, "rank 1 priority -3"},
		{vllm.SGLangServer{DPSize: 2, PriorityScheduling: true, LowPriorityFirst: true}, 1, "rank 1 priority 3"},
		{vllm.SGLangServer{DPSize: 1}, 0, "rank <nil> priority <nil>"},
		{vllm.SGLangServer{DPSize: 2}, 2, ""},
		{vllm.SGLangServer{DPSize: 1}, 1, ""},
	} {
		conn := startSGLangBridge(t, hs.URL, &c.server)
		if err := conn.Send(1, &wire.Generate{Model: []byte("m"), MaxTokens: 1, TopP: 1, DPRank: c.rank, Priority: 3, CacheSalt: []byte("s1"), Prompt: wire.TokensOf([]uint32{1})}); err != nil {
			t.Fatal(err)
		}
		r := readStream(t, conn, 1)
		if c.want == "" {
			if r.err == nil || r.err.Code != wire.CodeBadRequest || !strings.Contains(r.err.Message, "--dp-size") {
				t.Fatalf("%+v rank %d: %+v, want refused", c.server, c.rank, r)
			}
			select {
			case b := <-bodies:
				t.Fatalf("%+v rank %d reached the server: %v", c.server, c.rank, b)
			default:
			}
			continue
		}
		if r.err != nil || r.last.Finish != wire.FinishStop {
			t.Fatalf("%+v: %+v", c.server, r)
		}
		body := <-bodies
		if got := fmt.Sprintf("rank %v priority %v", body["data_parallel_rank"], body["priority"]); got != c.want || body["cache_salt"] != "s1" {
			t.Errorf("%+v: %s, salt %v; want %s", c.server, got, body["cache_salt"], c.want)
		}
	}
}

// TestSGLangServerCheck: each flag that differs from the server is named
// with the server argument it differs from; a server without
// /get_server_info (vLLM) is not SGLang.
func TestSGLangServerCheck(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 64, vllmtest.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := vllm.FetchSGLangServer(context.Background(), http.DefaultClient, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s.PageSize != 4 || s.MaxTotalNumTokens != 256 || s.Check("m", 4, 1, true) != nil {
		t.Fatalf("%+v: %v", s, s.Check("m", 4, 1, true))
	}
	err = s.Check("other", 16, 2, true)
	for _, want := range []string{`--model "other", but the server's --served-model-name is "m"`, "--block-size 16, but the server's --page-size is 4", "--dp-ranks 2, but the server's --dp-size is 1"} {
		if !errors.Is(err, vllm.ErrSGLangMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	s.KVEventsConfig = json.RawMessage("null")
	if err := s.Check("m", 4, 1, true); err == nil || !strings.Contains(err.Error(), "without --kv-events-config") {
		t.Errorf("no events: %v", err)
	}
	v, err := vllmtest.Start("m", 4, 64, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := vllm.FetchSGLangServer(context.Background(), http.DefaultClient, v.URL); !errors.Is(err, vllm.ErrSGLangMismatch) {
		t.Errorf("vLLM taken for SGLang: %v", err)
	}
}

// TestFetchSGLangServerStarting: a server that answers 503 (starting) is
// not refused as not SGLang: it is asked again.
func TestFetchSGLangServerStarting(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer hs.Close()
	if _, err := vllm.FetchSGLangServer(context.Background(), http.DefaultClient, hs.URL); err == nil || errors.Is(err, vllm.ErrSGLangMismatch) {
		t.Fatalf("a starting server: %v", err)
	}
}
