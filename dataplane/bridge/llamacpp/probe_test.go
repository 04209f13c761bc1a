package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer answers the connect checks with the captured answers of the
// real server, as edit changes them: /tokenize with kvgate's own ids
// unless edit changes them too.
type fakeServer struct {
	props, models []byte
	tokenize      func(ids []uint32) []uint32
	loading       atomic.Int32 // answer 503 this many times first
}

func newFake(t *testing.T) *fakeServer {
	return &fakeServer{props: golden(t, "props.json"), models: golden(t, "models.json"), tokenize: func(ids []uint32) []uint32 { return ids }}
}

func (f *fakeServer) start(t *testing.T) string {
	t.Helper()
	tok := builtin(t)
	mux := http.NewServeMux()
	answer := func(b []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if f.loading.Add(-1) >= 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`))
				return
			}
			_, _ = w.Write(b)
		}
	}
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) { answer(f.props)(w, r) })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { answer(f.models)(w, r) })
	mux.HandleFunc("POST /tokenize", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Content string `json:"content"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		_ = json.NewEncoder(w).Encode(map[string]any{"tokens": f.tokenize(tok.Encode(nil, body.Content, false))})
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// vllmModels is vLLM's /v1/models (ModelCard of
// vllm/entrypoints/openai/protocol.py); its /props is FastAPI's 404.
const vllmModels = `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1764578000,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":40960,"permission":[]}]}`

// TestCheck: a server that is what the flags say passes; one that differs
// is refused, the error saying what differs.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  func(f *fakeServer)
		model string
		err   error
		says  string
	}{
		{"passes", nil, testModel, nil, ""},
		{"wrong-model", nil, "Qwen/Qwen3-8B", ErrModelMismatch, `--model is "Qwen/Qwen3-8B" but the server serves "kvgate/test-llama"`},
		{"tokenizer", func(f *fakeServer) {
			f.tokenize = func(ids []uint32) []uint32 {
				if len(ids) > 3 {
					ids[3]++
				}
				return ids
			}
		}, testModel, ErrTokenizerMismatch, "tokenizes differently from token 3"},
		{"vocabulary", func(f *fakeServer) {
			f.models = []byte(strings.Replace(string(f.models), `"n_vocab":151669`, `"n_vocab":32000`, 1))
		},
			testModel, ErrTokenizerMismatch, "32000 tokens, kvgate's 151669"},
		{"eos", func(f *fakeServer) {
			f.props = []byte(strings.Replace(string(f.props), `"eos_token":"<|im_end|>"`, `"eos_token":"</s>"`, 1))
		},
			testModel, ErrTokenizerMismatch, `end-of-sequence token is "</s>"`},
		{"no-slots", func(f *fakeServer) {
			f.props = []byte(strings.Replace(string(f.props), `"endpoint_slots":true`, `"endpoint_slots":false`, 1))
		}, testModel, ErrEndpointOff, "--slots"},
		{"vllm", func(f *fakeServer) { f.props, f.models = nil, []byte(vllmModels) }, testModel, ErrNotLlamaCpp, "--engine-kind vllm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			if c.edit != nil {
				c.edit(f)
			}
			url := f.start(t)
			if f.props == nil { // no /props at all: a 404
				url = vllmLike(t)
			}
			s, err := Check(context.Background(), http.DefaultClient, Spec{URL: url, Model: c.model, Tokenizer: builtin(t)})
			if !errors.Is(err, c.err) || err != nil && !strings.Contains(err.Error(), c.says) || (err == nil) != (s != nil) {
				t.Fatalf("%v, want %v saying %q", err, c.err, c.says)
			}
			if err == nil && (s.Slots() != 2 || s.SlotContext() != 2048) {
				t.Fatalf("server %+v", s.Props)
			}
			if c.err != nil && !Refused(err) {
				t.Fatalf("%v is not a refusal", err)
			}
		})
	}
}

// vllmLike is a server shaped as vLLM's: no /props, its /v1/models.
func vllmLike(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(vllmModels)) })
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestConnectWaits: a server still loading its model (503) or not
// listening yet is retried until it passes; a refusal returns at once; an
// absent server gives up when the timeout passes.
func TestConnectWaits(t *testing.T) {
	f := newFake(t)
	f.loading.Store(3)
	url := f.start(t)
	spec := Spec{URL: url, Model: testModel, Tokenizer: builtin(t)}
	if _, err := Connect(context.Background(), http.DefaultClient, spec, time.Minute, quiet); err != nil {
		t.Fatalf("after loading: %v", err)
	}
	spec.Model = "other"
	start := time.Now()
	if _, err := Connect(context.Background(), http.DefaultClient, spec, time.Minute, quiet); !errors.Is(err, ErrModelMismatch) || time.Since(start) > 10*time.Second {
		t.Fatalf("refusal: %v after %v", err, time.Since(start))
	}
	spec.URL = "http://127.0.0.1:1" // nothing listens
	if _, err := Connect(context.Background(), http.DefaultClient, spec, 300*time.Millisecond, quiet); !errors.Is(err, ErrUnreachable) || Refused(err) {
		t.Fatalf("absent server: %v", err)
	}
}

// TestIdentify tells llama.cpp's server from vLLM's and from nothing.
func TestIdentify(t *testing.T) {
	ctx := context.Background()
	if k, why, err := Identify(ctx, http.DefaultClient, newFake(t).start(t)); k != KindLlamaCpp || err != nil || !strings.Contains(why, "llamacpp") {
		t.Fatalf("llama.cpp: %q %q %v", k, why, err)
	}
	if k, _, err := Identify(ctx, http.DefaultClient, vllmLike(t)); k != KindVLLM || err != nil {
		t.Fatalf("vLLM: %q %v", k, err)
	}
	if k, _, err := Identify(ctx, http.DefaultClient, "http://127.0.0.1:1"); k != KindUnknown || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("nothing: %q %v", k, err)
	}
}
