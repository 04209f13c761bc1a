package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// The router hashes a prompt with its images: one extra key per image
// (its placeholder range, its id's Key) on route.Request and on the
// GENERATE, and only engines that take images are asked for. The same
// image as an OpenAI data URL and as an Anthropic base64 block hashes
// alike; another image with the same text shares the blocks before the
// image's first block and none from it on.
func TestImageBlockKeys(t *testing.T) {
	m := qwenVLModel(t)
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	g := &Gateway{Media: &Media{Processors: map[string]media.Processor{model: qwen}}}
	a, b := patternPNG(t, 640, 480, 1), patternPNG(t, 640, 480, 2)
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: 16, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	hashes := func(req *genRequest) ([]uint64, *route.Request) {
		t.Helper()
		rr := &route.Request{Model: model, Tokens: req.tokens}
		req.routeMedia(rr)
		hs, err := h.Hash(nil, rr.Tokens, &rr.Keys)
		if err != nil {
			t.Fatal(err)
		}
		return hs, rr
	}
	viaOpenAI := placedRequest(t, g, m, api.DecodeChat, openAIImage(a, ""))
	hA, rr := hashes(viaOpenAI)
	im := viaOpenAI.Conversation.Images[0]
	want := kvstore.MMItem{Offset: uint32(im.Placed.Offset), Length: uint32(im.Placed.Length), Hash: media.IDOf(a).Key()}
	if len(rr.Keys.MM) != 1 || rr.Keys.MM[0] != want || rr.Needs&wire.FeatureMultimodal == 0 || im.Placed.Length != 391 {
		t.Fatalf("route request keys %+v needs %v; want %+v (391 placeholders) and MULTIMODAL", rr.Keys.MM, rr.Needs, want)
	}
	gen := viaOpenAI.generate()
	if n := gen.MMItems.Len(); n != 1 || gen.MMItems.At(0) != (wire.MMItem{Offset: want.Offset, Length: want.Length, Hash: want.Hash}) {
		t.Fatalf("GENERATE has %d mm_items, want one: %+v", n, want)
	}
	if n := gen.Media.Len(); n != 1 {
		t.Fatalf("GENERATE has %d media items for 1 mm item", n)
	}
	if it := gen.Media.At(0); it.ID != media.IDOf(a) || string(it.MIME) != "image/png" || it.Width != 640 || it.Height != 480 || !bytes.Equal(it.Data, a) {
		t.Fatalf("GENERATE media item: id %x %s %dx%d, %d bytes; want the image's", it.ID, it.MIME, it.Width, it.Height, len(it.Data))
	}

	hA2, _ := hashes(placedRequest(t, g, m, api.DecodeMessages, anthropicImage(a)))
	if fmt.Sprint(hA2) != fmt.Sprint(hA) {
		t.Fatal("one image as a data URL and as a base64 block hashes differently")
	}
	noImages := *viaOpenAI.Request
	noImages.Conversation.Images = nil
	plain, rrPlain := hashes(&genRequest{Request: &noImages, tokens: viaOpenAI.tokens})
	if rrPlain.Keys.MM != nil || rrPlain.Needs != 0 {
		t.Fatalf("a prompt without images: keys %+v, needs %v", rrPlain.Keys.MM, rrPlain.Needs)
	}
	hB, _ := hashes(placedRequest(t, g, m, api.DecodeChat, openAIImage(b, "")))
	first := im.Placed.Offset / 16 // the image's first block
	if len(hB) != len(hA) || len(hA) < first+2 {
		t.Fatalf("%d and %d blocks, the image from block %d", len(hA), len(hB), first)
	}
	for i := range hA {
		if same := hA[i] == hB[i]; same != (i < first) {
			t.Fatalf("block %d (image from block %d): shared %v across two images", i, first, same)
		}
		if same := hA[i] == plain[i]; same != (i < first) {
			t.Fatalf("block %d (image from block %d): shared %v with the prompt hashed without its image", i, first, same)
		}
	}
}

// Images reach the engines with their keys: a repeat of a prompt with an
// image, through any API (Chat, Messages, Responses), lands on the
// engine that served it and is cached past the image (cached_tokens
// covers it); the same text with another image is cached only before
// the image's first block; the choices of n > 1 carry the image too (the
// engine they ran on holds the image's blocks under its keys).
func TestImagesServedWithKeys(t *testing.T) {
	gw := imageGateway(t, media.Resolver{}, nil, nil, nil)
	a, b, c := patternPNG(t, 640, 480, 1), patternPNG(t, 640, 480, 2), patternPNG(t, 640, 480, 3)
	m := qwenVLModel(t)
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	placed := placedRequest(t, &Gateway{Media: &Media{Processors: map[string]media.Processor{model: qwen}}}, m, api.DecodeChat, openAIImage(a, ""))
	r := placed.Conversation.Images[0].Placed
	const bs = 16 // sim.DefaultConfig's block size
	throughImage, beforeImage := r.Offset+r.Length, r.Offset/bs*bs

	first := serve(t, gw.testGateway, "/v1/chat/completions", openAIImage(a, ""))
	if first.prompt != len(placed.tokens) {
		t.Fatalf("the engine counted %d prompt tokens, placement gives %d", first.prompt, len(placed.tokens))
	}
	for _, rep := range []struct{ path, body string }{
		{"/v1/chat/completions", openAIImage(a, "")},
		{"/v1/messages", anthropicImage(a)},
		{"/v1/responses", responsesImage(a)},
	} {
		again := serve(t, gw.testGateway, rep.path, rep.body)
		if again.engine != first.engine || again.cached < throughImage {
			t.Fatalf("%s repeat: on %s with %d cached; want %s with at least %d (through the image)",
				rep.path, again.engine, again.cached, first.engine, throughImage)
		}
	}
	if other := serve(t, gw.testGateway, "/v1/chat/completions", openAIImage(b, "")); other.cached > beforeImage {
		t.Fatalf("another image: %d tokens cached on %s, more than the %d before the image's first block", other.cached, other.engine, beforeImage)
	}
	if fan := serve(t, gw.testGateway, "/v1/chat/completions", openAIImage(c, `,"n":2`)); fan.choices != 2 {
		t.Fatalf("n=2: %d choices", fan.choices)
	}
	if after := serve(t, gw.testGateway, "/v1/chat/completions", openAIImage(c, "")); after.cached < throughImage {
		t.Fatalf("after n=2 with the image: %d cached on %s, want at least %d", after.cached, after.engine, throughImage)
	}
}

// Images the wire protocol cannot carry are refused naming the part: one
// over the bound on an item, the one that takes a request's past the
// bound on a GENERATE's.
func TestImagesOverWireLimits(t *testing.T) {
	buf := make([]byte, wire.DefaultMaxMediaItemBytes+1) // zero pages: not touched
	item := func(field string, n int) api.Image {
		return api.Image{Field: field, Resolved: media.Image{Data: buf[:n]}}
	}
	third := wire.DefaultMaxMediaBytes/3 + 1
	for _, c := range []struct {
		name   string
		images []api.Image
		field  string
	}{
		{"within", []api.Image{item("a", wire.DefaultMaxMediaItemBytes), item("b", wire.DefaultMaxMediaBytes-wire.DefaultMaxMediaItemBytes)}, ""},
		{"one item", []api.Image{item("a", 1), item("b", wire.DefaultMaxMediaItemBytes+1)}, "b"},
		{"the request", []api.Image{item("a", third), item("b", third), item("c", third), item("d", 1)}, "c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := checkMediaWire(c.images)
			if c.field == "" {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil || e.Status != 400 || e.Param != c.field || !strings.HasPrefix(e.Message, c.field+": image") {
				t.Fatalf("got %+v, want a 400 naming %s", e, c.field)
			}
		})
	}
}

// Only engines that take images serve them: beside one that does not,
// every request with an image lands on the one that does; when the
// model's only ready engine takes none, a request with an image is a 400
// naming its first image, in each API's shape, and text is still served.
func TestImagesOnlyToMultimodalEngines(t *testing.T) {
	noImages := func(c *sim.Config) { c.ID, c.NoMultimodal = "text-0", true }
	mixed := imageGateway(t, media.Resolver{}, nil, noImages)
	for i := range 6 {
		if got := serve(t, mixed.testGateway, "/v1/chat/completions", openAIImage(patternPNG(t, 56, 56, byte(i)), "")); got.engine != "sim-0" {
			t.Fatalf("image %d served by %s, which takes no images", i, got.engine)
		}
	}

	textOnly := imageGateway(t, media.Resolver{}, noImages)
	resp, body := post(t, textOnly.base+"/v1/chat/completions", "", openAIImage(patternPNG(t, 56, 56, 9), ""))
	var oe struct {
		Error struct{ Message, Param, Type string }
	}
	if err := json.Unmarshal([]byte(body), &oe); err != nil || resp.StatusCode != 400 || oe.Error.Param != "messages[0].content[0]" ||
		oe.Error.Type != "invalid_request_error" || !strings.Contains(oe.Error.Message, "engines of model "+model+" do not accept images") {
		t.Fatalf("OpenAI: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, textOnly.base+"/v1/messages", "", anthropicImage(patternPNG(t, 56, 56, 9)))
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &ae); err != nil || resp.StatusCode != 400 || ae.Type != "error" ||
		!strings.HasPrefix(ae.Error.Message, "messages.0.content.0: engines of model "+model+" do not accept images") {
		t.Fatalf("Anthropic: %d %s", resp.StatusCode, body)
	}
	text := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, model)
	if got := serve(t, textOnly.testGateway, "/v1/chat/completions", text); got.engine != "text-0" {
		t.Fatalf("text served by %q", got.engine)
	}
}
