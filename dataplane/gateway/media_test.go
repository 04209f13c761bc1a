package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/tokenize"
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
	plain, _ := api.DecodeChat([]byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)), nil)
	if e := g.checkMedia(&Model{}, plain); e != nil {
		t.Fatalf("a chat without images: %v", e)
	}
}

// Through the gateway with a processor configured: an image fetched
// from an allowed host is read, identified, counted and served by the
// engine, which counts its placeholder tokens in the prompt; a host not
// allowed is named, in each API's shape.
func TestImageThroughGatewayWithProcessor(t *testing.T) {
	img := testPNG(t, 640, 480)
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img) }))
	defer imgSrv.Close()
	tok := qwenVLModel(t).Tok // a template that writes each image's marker
	o := media.Defaults()
	o.AllowHosts, o.AllowPrivate = []string{"127.0.0.1"}, true
	f, err := media.NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	base := imageGateway(t, media.Resolver{Fetcher: f}, nil).base

	resp, body := post(t, base+"/v1/chat/completions", "", imageChat(imgSrv.URL+"/cat.png"))
	var served struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &served); err != nil || resp.StatusCode != 200 {
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
	if served.Usage.PromptTokens != tr.Count {
		t.Fatalf("the engine counted %d prompt tokens, /tokenize %d", served.Usage.PromptTokens, tr.Count)
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

// Bad images through the gateway, in each API's own error shape: a 400
// naming the part for bytes that are no image, a size the container
// declares that the bytes contradict, more bytes than the limit, and a
// URL whose host is not allowed.
func TestBadImagesThroughGateway(t *testing.T) {
	small, img := testPNG(t, 56, 56), patternPNG(t, 640, 480, 1)
	badIHDR := slices.Clone(small)
	badIHDR[11] = 14 // IHDR's length field: 14 bytes, not 13
	o := media.Defaults()
	o.AllowHosts = []string{"images.example"}
	f, err := media.NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	limit := len(img) - 1
	gw := imageGateway(t, media.Resolver{Fetcher: f, MaxBytes: int64(limit)}, nil)
	base := gw.base
	if len(small) >= limit {
		t.Fatalf("the small image (%d bytes) is not under the limit (%d)", len(small), limit)
	}
	b64 := base64.StdEncoding.EncodeToString
	openAI := func(url string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"see"},`+
			`{"type":"image_url","image_url":{"url":%q}}]}]}`, model, url)
	}
	anthropic := func(source string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"see"},`+
			`{"type":"image","source":%s}]}]}`, model, source)
	}
	inline := func(b []byte) string {
		return fmt.Sprintf(`{"type":"base64","media_type":"image/png","data":%q}`, b64(b))
	}
	for _, c := range []struct {
		name, openAI, anthropic, says string
	}{
		{"undecodable", dataURLOf([]byte("this is text, not a picture")), inline([]byte("this is text, not a picture")), "undecodable image"},
		{"declared size", dataURLOf(badIHDR), inline(badIHDR), "declared size does not match the data: PNG IHDR declares 14 bytes"},
		{"over the limit", dataURLOf(img), inline(img), fmt.Sprintf("%d bytes, over the limit of %d", len(img), limit)},
		{"host not allowed", "https://elsewhere.example/cat.png", `{"type":"url","url":"https://elsewhere.example/cat.png"}`,
			`host "elsewhere.example" is not among the hosts images are fetched from`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, base+"/v1/chat/completions", "", openAI(c.openAI))
			var oe struct {
				Error struct{ Message, Type, Param string }
			}
			if err := json.Unmarshal([]byte(body), &oe); err != nil || resp.StatusCode != 400 || oe.Error.Param != "messages[0].content[1]" ||
				oe.Error.Type != "invalid_request_error" || !strings.Contains(oe.Error.Message, c.says) {
				t.Fatalf("OpenAI: %d %s; want 400 on messages[0].content[1] saying %q", resp.StatusCode, body, c.says)
			}
			resp, body = post(t, base+"/v1/messages", "", anthropic(c.anthropic))
			var ae struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal([]byte(body), &ae); err != nil || resp.StatusCode != 400 || ae.Type != "error" || ae.Error.Type != "invalid_request_error" ||
				!strings.HasPrefix(ae.Error.Message, "messages.0.content.1: ") || !strings.Contains(ae.Error.Message, c.says) {
				t.Fatalf("Anthropic: %d %s; want 400 naming messages.0.content.1 saying %q", resp.StatusCode, body, c.says)
			}
		})
	}
	// The same requests with a good image are served.
	serve(t, gw.testGateway, "/v1/chat/completions", openAI(dataURLOf(small)))
	serve(t, gw.testGateway, "/v1/messages", anthropic(inline(small)))
}
