package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// A request with an image served disaggregated: both sides get the image
// (the decode side's GENERATE is the prefill side's with the first
// token), so the decode engine holds the prompt's blocks under the
// image's keys and a repeat is served from its cache through the image.
func TestImageSplit(t *testing.T) {
	role := func(r wire.EngineRole) func(*sim.Config) {
		return func(c *sim.Config) { c.ID, c.Rank.Disagg.Role = r.String()+"-0", r }
	}
	f := imageGateway(t, media.Resolver{}, role(wire.RolePrefill), role(wire.RoleDecode))
	var de *engine.Engine
	for _, e := range f.g.Pool.Engines() {
		if e.Info().ID == "decode-0" {
			de = e
		}
	}
	// A decode batch the router counts on the decode engine, so that a
	// long prompt is worth splitting.
	busy, err := f.g.Router.Route(&route.Request{Model: model, Tokens: []uint32{1, 2, 3}})
	if err != nil || busy.Engine != de {
		t.Fatalf("busy request: %v", err)
	}
	busy.FirstToken()
	busy.Generated(40000)
	t.Cleanup(busy.Done)

	img := patternPNG(t, 1024, 768, 4) // 999 placeholder tokens
	var long strings.Builder
	for i := range 600 {
		fmt.Fprintf(&long, "w%d ", i)
	}
	body := fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},`+
		`{"type":"text","text":%q}]}]}`, model, dataURLOf(img), long.String())
	resp, out := post(t, f.base+"/v1/chat/completions", "", body)
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-engine") != "decode-0" || resp.Header.Get(prefillEngineHeader) != "prefill-0" {
		t.Fatalf("%d engine %q prefill engine %q: %s", resp.StatusCode, resp.Header.Get("x-kvgate-engine"), resp.Header.Get(prefillEngineHeader), out)
	}
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	placed := placedRequest(t, &Gateway{Media: &Media{Processors: map[string]media.Processor{model: qwen}}}, qwenVLModel(t), api.DecodeChat, body)
	r := placed.Conversation.Images[0].Placed
	// Served aggregated (the decode engine holds the prompt), so the
	// cached tokens are the decode engine's.
	resp, out = post(t, f.base+"/v1/chat/completions", "", body)
	again := servedOf(t, resp, out)
	if split := resp.Header.Get(prefillEngineHeader); split != "" || again.engine != "decode-0" || again.cached < r.Offset+r.Length {
		t.Fatalf("repeat on %s (prefilled on %q) with %d cached; want decode-0, aggregated, with at least %d (through the image)",
			again.engine, split, again.cached, r.Offset+r.Length)
	}
}

// A request with an image for a model only an HTTP engine serves is
// relayed unchanged, the image's bytes included, after kvgate has read
// and placed the image (its checks and the context apply).
func TestImagePassedThrough(t *testing.T) {
	const httpModel = "http/vl"
	var mu sync.Mutex
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+httpModel+`","object":"model"}]}`)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"grey"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	pp, err := passthrough.NewPool([]string{srv.URL}, ebpf.NewCopy(), route.DefaultWeights(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pp.Start(10 * time.Millisecond)
	defer pp.Close()
	for deadline := time.Now().Add(30 * time.Second); !pp.Serves(httpModel); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the HTTP engine's models never arrived")
		}
	}
	m := qwenVLModel(t)
	m.Name = httpModel
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), nil)
	defer pool.Close()
	logs := &syncBuffer{}
	g := &Gateway{Models: []*Model{m}, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool, Passthrough: pp,
		Log: slog.New(slog.NewTextHandler(logs, nil)), FirstTokenTimeout: time.Minute,
		Media: &Media{Processors: map[string]media.Processor{httpModel: qwen}}}
	base := serveGateway(t, g, logs).base
	body := strings.Replace(openAIImage(patternPNG(t, 640, 480, 5), ""), `"model":"`+model+`"`, `"model":"`+httpModel+`"`, 1)
	resp, out := post(t, base+"/v1/chat/completions", "", body)
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || string(got) != body {
		t.Fatalf("%d %s; the HTTP engine got %d bytes of the %d sent (the same: %v)", resp.StatusCode, out, len(got), len(body), string(got) == body)
	}
	bad := strings.Replace(body, "data:image/png;base64,iVBOR", "data:image/png;base64,AAAAA", 1)
	if resp, out := post(t, base+"/v1/chat/completions", "", bad); resp.StatusCode != 400 || !strings.Contains(out, "undecodable image") {
		t.Fatalf("an undecodable image for an HTTP engine: %d %s", resp.StatusCode, out)
	}
}
