package llamacpp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestRequestRefusesByName: every GENERATE field llama.cpp cannot honour
// is refused with an ERROR that names it, before the server is asked.
func TestRequestRefusesByName(t *testing.T) {
	hits := make(chan []byte, 16)
	_, conn := startEngine(t, replay(t, golden(t, "completion.sse"), hits))
	base := wire.Generate{Model: []byte(testModel), MaxTokens: 4, TopP: 1, DPRank: wire.AnyRank, Prompt: wire.TokensOf([]uint32{1, 2, 3})}
	for i, c := range []struct {
		field string
		code  wire.ErrorCode
		mod   func(g *wire.Generate)
	}{
		{"model", wire.CodeUnknownModel, func(g *wire.Generate) { g.Model = []byte("other") }},
		{"lora_id", wire.CodeUnknownLoRA, func(g *wire.Generate) { g.LoRAID = 1 }},
		{"guided", wire.CodeBadRequest, func(g *wire.Generate) { g.Guided = []byte(`{"response_format":{"type":"json_object"}}`) }},
		{"kv_transfer", wire.CodeBadRequest, func(g *wire.Generate) { g.KVTransfer = []byte(`{}`) }},
		{"cache_salt", wire.CodeBadRequest, func(g *wire.Generate) { g.CacheSalt = []byte("tenant") }},
		{"priority", wire.CodeBadRequest, func(g *wire.Generate) { g.Priority = -1 }},
		{"dp_rank", wire.CodeBadRequest, func(g *wire.Generate) { g.DPRank = 1 }},
		{"seed", wire.CodeBadRequest, func(g *wire.Generate) { g.Seed, g.Flags = 1<<32, wire.GenHasSeed }},
		{"max_tokens", wire.CodeBadRequest, func(g *wire.Generate) { g.MaxTokens = 1 << 31 }},
	} {
		g := base
		c.mod(&g)
		stream := uint32(2*i + 1)
		if err := conn.Send(stream, &g); err != nil {
			t.Fatal(err)
		}
		if _, _, _, e := frames(t, conn, stream); e == nil || e.Code != c.code || !strings.HasPrefix(e.Message, c.field+":") {
			t.Errorf("%s: %+v", c.field, e)
		}
	}
	// Images: the bridge announces no MULTIMODAL, so wire/serve refuses
	// them before the backend sees the GENERATE, naming the feature.
	g := base
	g.MMItems = wire.MMItemsOf([]wire.MMItem{{Offset: 0, Length: 1, Hash: 9}})
	if err := conn.Send(99, &g); err != nil {
		t.Fatal(err)
	}
	if _, _, _, e := frames(t, conn, 99); e == nil || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, "MULTIMODAL") {
		t.Errorf("mm_items: %+v", e)
	}
	if len(hits) != 0 {
		t.Fatalf("%d refused requests reached the server", len(hits))
	}
}

// TestRequestBody: what the server is asked, the router's sampling
// included (top_k, top_p and min_p always, for llama.cpp's defaults are
// not the router's).
func TestRequestBody(t *testing.T) {
	bodies := make(chan []byte, 1)
	_, conn := startEngine(t, replay(t, golden(t, "completion.sse"), bodies))
	g := &wire.Generate{Model: []byte(testModel), MaxTokens: 12, Temperature: 0.7, TopP: 0.9, TopK: -1, Seed: 7,
		Flags: wire.GenHasSeed | wire.GenIgnoreEOS | wire.GenWantText, DPRank: wire.AnyRank, Prompt: wire.TokensOf(seq(1000, 100))}
	if err := conn.Send(1, g); err != nil {
		t.Fatal(err)
	}
	ids, first, last, e := frames(t, conn, 1)
	if e != nil {
		t.Fatalf("stream failed: %+v", e)
	}
	var body map[string]any
	if err := json.Unmarshal(<-bodies, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n_predict": 12.0, "temperature": 0.7, "top_p": 0.9, "top_k": 0.0, "min_p": 0.0, "seed": 7.0,
		"ignore_eos": true, "cache_prompt": true, "stream": true, "return_tokens": true, "timings_per_token": true}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("%s = %v, want %v", k, body[k], v)
		}
	}
	if p, _ := body["prompt"].([]any); len(p) != 100 || p[0] != 1000.0 {
		t.Errorf("prompt %v", body["prompt"])
	}
	if ref := nonStream(t, "completion"); fmt.Sprint(ids) != fmt.Sprint(ref.Tokens) || string(first.Text) != "orre" || last.CompletionTokens != 12 {
		t.Fatalf("ids %v, first %+v, last %+v", ids, first, last)
	}
}

// TestStopTokens: a stop token id ends the stream after it, finish reason
// stop, the text of a frame cut short left out; llama.cpp's request is
// closed.
func TestStopTokens(t *testing.T) {
	for _, c := range []struct {
		name, golden string
		stop         uint32
		want         []uint32
		text         bool
	}{
		{"first-token", "completion", 92433, []uint32{92433}, true},
		{"inside-a-frame", "completion_utf8_gaps", 116, []uint32{160, 116}, false}, // 160 116 255 recovered as one frame
	} {
		t.Run(c.name, func(t *testing.T) {
			_, conn := startEngine(t, replay(t, golden(t, c.golden+".sse"), nil))
			g := &wire.Generate{Model: []byte(testModel), MaxTokens: 12, TopP: 1, Flags: wire.GenWantText,
				StopTokens: wire.TokensOf([]uint32{c.stop}), Prompt: wire.TokensOf(seq(1000, 10))}
			if err := conn.Send(1, g); err != nil {
				t.Fatal(err)
			}
			ids, _, last, e := frames(t, conn, 1)
			if e != nil || fmt.Sprint(ids) != fmt.Sprint(c.want) || last.Finish != wire.FinishStop ||
				last.CompletionTokens != uint32(len(c.want)) || (len(last.Text) > 0) != c.text {
				t.Fatalf("ids %v last %+v err %+v", ids, last, e)
			}
		})
	}
}

// TestCancelClosesTheRequest: CANCEL closes the HTTP request (llama.cpp's
// cancellation) and ends the stream as cancelled; an HTTP error ends it
// with llama.cpp's message and a code the router acts on.
func TestCancelClosesTheRequest(t *testing.T) {
	closed := make(chan struct{})
	first := strings.SplitAfter(string(golden(t, "completion.sse")), "\n\n")[0]
	tooLong := strings.SplitN(string(golden(t, "completion_too_long.txt")), "\n", 2)[1]
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			NPredict int `json:"n_predict"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.NPredict == 4 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(tooLong))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(first))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	}))
	defer hs.Close()
	e, conn := startEngine(t, hs.URL)
	g := &wire.Generate{Model: []byte(testModel), MaxTokens: 1000, TopP: 1, Prompt: wire.TokensOf(seq(1000, 100))}
	if err := conn.Send(1, g); err != nil {
		t.Fatal(err)
	}
	f, err := conn.ReadFrame()
	if err != nil || f.Type != wire.TypeTokens {
		t.Fatalf("first frame %v %v", f.Type, err)
	}
	if err := conn.Send(1, &wire.Cancel{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("CANCEL did not close the HTTP request")
	}
	if _, _, last, e := frames(t, conn, 1); e != nil || last.Finish != wire.FinishCancelled {
		t.Fatalf("cancelled stream: %+v %+v", last, e)
	}
	checkFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !e.Idle() {
			return fmt.Errorf("engine not idle")
		}
		return nil
	})
	g.MaxTokens = 4
	if err := conn.Send(3, g); err != nil {
		t.Fatal(err)
	}
	if _, _, _, e := frames(t, conn, 3); e == nil || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, "exceeds the available context size") {
		t.Fatalf("HTTP 400: %+v", e)
	}
}
