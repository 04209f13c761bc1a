package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/sim/simtest"
)

// patternPNG is a w x h PNG whose pixels depend on seed: images of one
// size (hence one placeholder count) and different content ids.
func patternPNG(t testing.TB, w, h int, seed byte) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i)*7 + seed
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// afterImage is the text that follows the image in these tests: long
// enough that the block holding the image's last placeholder is full.
const afterImage = "Describe this picture in detail, corner by corner, naming every shape and shade of grey you can see in it."

// openAIImage is a one-message chat about img as an OpenAI data URL.
func openAIImage(img []byte, extra string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":4%s,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}},`+
		`{"type":"text","text":%q}]}]}`, model, extra, dataURLOf(img), afterImage)
}

// anthropicImage is openAIImage's message as an Anthropic base64 block.
func anthropicImage(img []byte) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":[`+
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":%q}},{"type":"text","text":%q}]}]}`,
		model, base64.StdEncoding.EncodeToString(img), afterImage)
}

// responsesImage is openAIImage's message as a Responses input_image.
func responsesImage(img []byte) string {
	return fmt.Sprintf(`{"model":%q,"max_output_tokens":4,"input":[{"role":"user","content":[{"type":"input_image","image_url":%q},`+
		`{"type":"input_text","text":%q}]}]}`, model, dataURLOf(img), afterImage)
}

// placedRequest decodes body with decode and reads, renders and places
// its images as the gateway does before routing.
func placedRequest(t *testing.T, g *Gateway, m *Model, decode func([]byte, api.ModelCheck) (*api.Request, *api.Error), body string) *genRequest {
	t.Helper()
	req, e := decode([]byte(body), nil)
	if e == nil {
		e = g.checkMedia(m, req)
	}
	var ids []uint32
	if e == nil {
		ids, _, e = g.chatTokens(m, &req.Conversation, 0, req)
	}
	if e == nil {
		ids, e = g.placeMedia(m, req, ids)
	}
	if e != nil {
		t.Fatal(e)
	}
	return &genRequest{Request: req, tokens: ids, model: m}
}

// imageGateway is a gateway that takes images for model (Qwen2.5-VL's
// processor and chat template, images read by res) before one simulated
// engine per mod (sim.DefaultConfig with the model and no time taken,
// changed by mod when not nil), routed by kv.
func imageGateway(t *testing.T, res media.Resolver, mods ...func(*sim.Config)) *imageFleet {
	t.Helper()
	var addrs []string
	for i, mod := range mods {
		cfg := sim.DefaultConfig()
		cfg.ID, cfg.Rank.Model, cfg.Rank.Profile, cfg.Rank.NoRandomEOS = fmt.Sprintf("sim-%d", i), model, sim.ZeroProfile, true
		if mod != nil {
			mod(&cfg)
		}
		_, addr := simtest.Serve(t, cfg)
		addrs = append(addrs, addr)
	}
	pcfg := engine.DefaultConfig()
	pcfg.Logger = slog.New(slog.DiscardHandler)
	pool := simtest.Pool(t, pcfg, kvstore.New(kvstore.Options{}), addrs...)
	qwen, _ := media.NewProcessor("qwen2.5-vl", media.ProcessorOptions{})
	logs := &syncBuffer{}
	g := &Gateway{Tok: qwenVLModel(t).Tok, Router: route.New(pool, route.PolicyKV, route.DefaultWeights()), Pool: pool,
		Log: slog.New(slog.NewTextHandler(logs, nil)), Retries: 1, FirstTokenTimeout: time.Minute,
		Media: &Media{Resolver: res, Processors: map[string]media.Processor{model: qwen}}}
	return &imageFleet{serveGateway(t, g, logs), g}
}

// imageFleet is imageGateway's gateway, served and as built.
type imageFleet struct {
	*testGateway
	g *Gateway
}

// served is what a test reads of an answer: the engine, and the usage in
// either API's shape.
type served struct {
	engine         string
	prompt, cached int
	choices        int
}

func serve(t *testing.T, gw *testGateway, path, body string) served {
	t.Helper()
	resp, raw := post(t, gw.base+path, "", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
	}
	return servedOf(t, resp, raw)
}

// servedOf reads a 200 answer of either API.
func servedOf(t *testing.T, resp *http.Response, raw string) served {
	t.Helper()
	var out struct {
		Choices []json.RawMessage
		Usage   struct {
			PromptTokens  int `json:"prompt_tokens"`
			InputTokens   int `json:"input_tokens"`
			CacheRead     int `json:"cache_read_input_tokens"`
			PromptDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			InputDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		}
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	u := out.Usage
	return served{engine: resp.Header.Get("x-kvgate-engine"), prompt: u.PromptTokens + u.InputTokens,
		cached: u.PromptDetails.CachedTokens + u.InputDetails.CachedTokens + u.CacheRead, choices: len(out.Choices)}
}
