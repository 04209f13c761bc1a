package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
)

func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func imageChat(url string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},`+
		`{"type":"image_url","image_url":{"url":%q}}]}]}`, model, url)
}

func dataURLOf(b []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
}

// Through the gateway: a chat with an image, for a model without an
// image processor, is a 400 naming the part, in the API's shape.
func TestImageRefusedWithoutProcessor(t *testing.T) {
	base := startGateway(t, nil)
	resp, body := post(t, base+"/v1/chat/completions", "", imageChat(dataURLOf(testPNG(t, 64, 64))))
	var e struct {
		Error struct{ Message, Param string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != 400 || e.Error.Param != "messages[0].content[1]" ||
		!strings.Contains(e.Error.Message, "has no image processor configured") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	anthropic := fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":`+
		`{"type":"base64","media_type":"image/png","data":%q}}]}]}`, model, base64.StdEncoding.EncodeToString(testPNG(t, 64, 64)))
	resp, body = post(t, base+"/v1/messages", "", anthropic)
	if resp.StatusCode != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "messages.0.content.0: model") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestCheckMedia(t *testing.T) {
	img := testPNG(t, 1024, 768)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img) }))
	defer srv.Close()
	o := media.Defaults()
	o.AllowHosts, o.AllowPrivate = []string{"127.0.0.1"}, true
	f, err := media.NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	qwen, _ := media.NewProcessor("qwen2-vl", media.ProcessorOptions{})
	g := &Gateway{Media: &Media{Resolver: media.Resolver{Fetcher: f}, Processors: map[string]media.Processor{model: qwen}}}
	cases := []struct {
		name, url, param, contains string
	}{
		{"too small for qwen", dataURLOf(testPNG(t, 10, 300)), "messages[0].content[1]", "qwen2-vl: image size refused"},
		{"undecodable", "data:image/png;base64,AAAA", "messages[0].content[1]", "undecodable image"},
		{"host not allowed", "https://img.example/cat.png", "messages[0].content[1]", `host "img.example" is not among`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, e := api.DecodeChat([]byte(imageChat(c.url)), nil)
			if e != nil {
				t.Fatal(e)
			}
			e = g.checkMedia(&Model{}, req)
			if e == nil || e.Status != 400 || e.Param != c.param || !strings.Contains(e.Message, c.contains) {
				t.Fatalf("got %+v, want 400 on %s containing %q", e, c.param, c.contains)
			}
		})
	}
	for _, url := range []string{dataURLOf(img), srv.URL + "/cat.png"} {
		req, _ := api.DecodeChat([]byte(imageChat(url)), nil)
		if e := g.checkMedia(&Model{}, req); e != nil {
			t.Fatalf("%.40s: %v", url, e)
		}
		im := req.Conversation.Images[0]
		if im.Resolved.ID != media.IDOf(img) {
			t.Fatalf("id %v, want the bytes' %v", im.Resolved.ID, media.IDOf(img))
		}
		// 1024x768 under smart_resize: 768 -> 756 and 1024 -> 1036 (the
		// nearest multiples of 28), (756/14)*(1036/14)/2^2 tokens.
		if n := im.Expansion.Tokens(); n != 54*74/4 {
			t.Fatalf("%d placeholder tokens, want %d", n, 54*74/4)
		}
	}
	if e := refuseMedia(&Model{}, func() *api.Request { r, _ := api.DecodeChat([]byte(imageChat(dataURLOf(img))), nil); return r }()); e == nil ||
		e.Param != "messages[0].content[1]" || !strings.Contains(e.Message, "engines of model "+model+" do not accept images yet") {
		t.Fatalf("refusal: %+v", e)
	}
	plain, _ := api.DecodeChat([]byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)), nil)
	if e := g.checkMedia(&Model{}, plain); e != nil {
		t.Fatalf("a chat without images: %v", e)
	}
}

// Through the gateway with a processor configured: an image fetched
// from an allowed host is read, identified and counted, then refused as
// engines cannot take it yet; a host not allowed is named, in each API's
// shape.
func TestImageThroughGatewayWithProcessor(t *testing.T) {
	img := testPNG(t, 640, 480)
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img) }))
	defer imgSrv.Close()
	tok := qwenVLModel(t).Tok // a template that writes each image's marker
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile = model, sim.ZeroProfile
	sims, err := sim.StartLocal(1, cfg, "sim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sims.Close)
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), sims.Addrs)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, 1); err != nil {
		t.Fatal(err)
	}
	o := media.Defaults()
	o.AllowHosts, o.AllowPrivate = []string{"127.0.0.1"}, true
	f, err := media.NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	logs := &syncBuffer{}
	g := &Gateway{Tok: tok, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool,
		Log: slog.New(slog.NewTextHandler(logs, nil)), Retries: 1, FirstTokenTimeout: time.Minute,
		Media: &Media{Resolver: media.Resolver{Fetcher: f}, Processors: map[string]media.Processor{model: qwen}}}
	base := serveGateway(t, g, logs).base

	resp, body := post(t, base+"/v1/chat/completions", "", imageChat(imgSrv.URL+"/cat.png"))
	if resp.StatusCode != 400 || !strings.Contains(body, `"param":"messages[0].content[1]"`) || !strings.Contains(body, "do not accept images yet") {
		t.Fatalf("allowed host: %d %s", resp.StatusCode, body)
	}
	// /tokenize gives the prompt an engine would get: the image's 391
	// placeholder tokens (640x480 -> 644x476 under smart_resize:
	// (476/14)*(644/14)/4) in place of the template's one.
	resp, body = post(t, base+"/tokenize", "", imageChat(dataURLOf(img)))
	var tr struct {
		Tokens []uint32 `json:"tokens"`
		Count  int      `json:"count"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/tokenize: %d %s", resp.StatusCode, body)
	}
	pad, _ := tok.TokenID("<|image_pad|>")
	plain, _, _ := tok.EncodeChat(nil, &tokenize.ChatInput{Messages: json.RawMessage(`[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image"}]}]`), AddGenerationPrompt: true})
	if first := slices.Index(tr.Tokens, pad); tr.Count != len(plain)-1+391 || len(tr.Tokens) != tr.Count || first != slices.Index(plain, pad) ||
		slices.ContainsFunc(tr.Tokens[first:first+391], func(id uint32) bool { return id != pad }) {
		t.Fatalf("/tokenize: %d tokens, want %d with 391 placeholders from %d", tr.Count, len(plain)-1+391, slices.Index(plain, pad))
	}
	resp, body = post(t, base+"/v1/chat/completions", "", imageChat("https://img.example/cat.png"))
	if resp.StatusCode != 400 || !strings.Contains(body, `host \"img.example\" is not among`) {
		t.Fatalf("host not allowed: %d %s", resp.StatusCode, body)
	}
	anthropic := fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"and?"},`+
		`{"type":"image","source":{"type":"base64","media_type":"image/gif","data":%q}}]}]}`, model, base64.StdEncoding.EncodeToString(img))
	resp, body = post(t, base+"/v1/messages", "", anthropic)
	if resp.StatusCode != 400 || !strings.Contains(body, `"type":"invalid_request_error"`) ||
		!strings.Contains(body, "messages.0.content.1: media type mismatch: declared image/gif but the bytes are a PNG image") {
		t.Fatalf("declared type: %d %s", resp.StatusCode, body)
	}
}
