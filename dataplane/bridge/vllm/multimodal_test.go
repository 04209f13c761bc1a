package vllm_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
	"github.com/kvgate/kvgate/wire/serve/servetest"
)

// imageTokens is the fake vision model's placeholder count of an image
// (fixedTokens).
const imageTokens = 10

func fixedTokens([]byte) int { return imageTokens }

// mmRig is a multimodal bridge in front of a fake vision vLLM (blocks of
// 4), its KV events subscribed, a router's connection to it, and the
// router's index fed from that connection's KV_EVENTS.
type mmRig struct {
	f     *vllmtest.Fake
	b     *vllm.Bridge
	c     *wire.Conn
	h     *kvstore.Hasher
	index *kvstore.Index
	slot  kvstore.Slot
	// frames are the connection's TOKENS and ERROR frames (copied), as
	// the reading goroutine meets them.
	frames chan wire.Frame
}

// startMMRig starts a rig whose fake vLLM gives an image placeholders(image)
// placeholder tokens.
func startMMRig(t *testing.T, placeholders func([]byte) int) *mmRig {
	t.Helper()
	f, err := vllmtest.Start("m", 4, 1000, vllmtest.Tagged, vllmtest.WithMultimodal(placeholders))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	log := slog.New(slog.DiscardHandler)
	r := &mmRig{f: f, h: hasher(t), index: kvstore.New(kvstore.Options{})}
	e := vllm.NewEngine(f.URL, "m", nil, log)
	e.Multimodal, e.Renders = true, vllm.NewRenderCache(1<<20)
	r.b = vllm.NewBridge(e, vllm.NewTranslator(r.h, nil), 1, 1000)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "bridge", BlockSize: 4, Models: []string{"m"},
		Features: e.Features()}, Logger: log}, r.b)
	e.Out = srv
	slots, err := r.index.AddEngine(kvstore.EngineConfig{ID: "bridge", Ranks: 1, Capacity: [kvstore.NumTiers]uint64{1000}})
	if err != nil {
		t.Fatal(err)
	}
	r.slot = slots[0]
	sub := &vllm.Subscriber{Endpoint: f.EventsURL, ReplayEndpoint: f.ReplayURL, Log: log,
		RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond, ReplayTimeout: 10 * time.Second,
		Batch: func(_ uint64, b *vllm.Batch) { r.b.Events(0, b) },
		Lost:  func(reason string) { r.b.Lost(0, reason) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	r.c = servetest.Router(t, srv)
	r.frames = make(chan wire.Frame, 64)
	go r.readLoop(t)
	// The subscription lands on its own time: serve text prompts until
	// their blocks reach the router.
	seed := 0
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if r.b.T.Blocks(0) > 0 {
			return nil
		}
		seed++
		f.Serve(tokens(1000 + seed))
		return fmt.Errorf("no block translated yet")
	})
	return r
}

// image is a GENERATE's image placed at offset in the prompt, over
// imageTokens tokens.
func image(data []byte, offset uint32) (wire.MediaItem, wire.MMItem) {
	it := wire.MediaItem{ID: xxh3.Hash128(data).Bytes(), MIME: []byte("image/png"), Width: 28, Height: 28, Data: data}
	return it, wire.MMItem{Offset: offset, Length: imageTokens, Hash: it.Key()}
}

// kvKeys are kvgate's keys of a prompt with these images.
func kvKeys(mm ...wire.MMItem) *kvstore.Keys {
	k := &kvstore.Keys{}
	for _, it := range mm {
		k.MM = append(k.MM, kvstore.MMItem{Offset: it.Offset, Length: it.Length, Hash: it.Hash})
	}
	return k
}

// mmPrompt is 3 text tokens, an image's placeholders, 7 text tokens: 20
// tokens, 5 blocks, the image over blocks 0-3.
func mmPrompt() []uint32 {
	p := []uint32{11, 12, 13}
	p = append(p, slices.Repeat([]uint32{9}, imageTokens)...)
	return append(p, 21, 22, 23, 24, 25, 26, 27)
}

// generate sends a GENERATE with images and reads the stream to its end,
// applying every KV_EVENTS it reads to the router's index; it returns the
// tokens or the stream's ERROR.
func (r *mmRig) generate(t *testing.T, stream uint32, prompt []uint32, media []wire.MediaItem, mm []wire.MMItem) ([]uint32, *wire.Error) {
	t.Helper()
	g := &wire.Generate{RequestID: []byte(fmt.Sprint("mm-", stream)), Model: []byte("m"), MaxTokens: 3, TopP: 1,
		Prompt: wire.TokensOf(prompt), MMItems: wire.MMItemsOf(mm), Media: wire.MediaOf(media)}
	if err := r.c.SendGenerate(stream, g); err != nil {
		t.Fatal(err)
	}
	var toks []uint32
	for {
		f := r.read(t)
		if f.Stream != stream {
			continue
		}
		switch f.Type {
		case wire.TypeError:
			var e wire.Error
			if err := wire.DecodeFrame(f, &e, nil); err != nil {
				t.Fatal(err)
			}
			return nil, &e
		case wire.TypeTokens:
			var m wire.TokensMsg
			if err := wire.DecodeFrame(f, &m, nil); err != nil {
				t.Fatal(err)
			}
			toks = m.Tokens.AppendTo(toks)
			if m.Flags&wire.TokLast != 0 {
				return toks, nil
			}
		}
	}
}

// readLoop reads the connection until it closes, applying KV_EVENTS to
// the index and handing the streams' frames over.
func (r *mmRig) readLoop(t *testing.T) {
	defer close(r.frames)
	for {
		f, err := r.c.ReadFrame()
		if err != nil {
			return
		}
		if f.Type != wire.TypeKVEvents {
			f.Payload = append([]byte(nil), f.Payload...)
			r.frames <- f
			continue
		}
		var m wire.KVEvents
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Error(err)
			return
		}
		if err := r.index.Apply(r.slot, kvEvents(m.Events)); err != nil {
			t.Error(err)
			return
		}
	}
}

// read returns the next stream frame.
func (r *mmRig) read(t *testing.T) wire.Frame {
	t.Helper()
	f, ok := <-r.frames
	if !ok {
		t.Fatal("the connection closed")
	}
	return f
}

// depth is how many leading blocks of kvgate's hashes of prompt (with
// keys) the router's index holds.
func (r *mmRig) depth(t *testing.T, prompt []uint32, keys *kvstore.Keys) int {
	t.Helper()
	hs, err := r.h.Hash(nil, prompt, keys)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]kvstore.Match, 1)
	r.index.Match(hs, []kvstore.Slot{r.slot}, out)
	return int(out[0].Blocks[kvstore.TierGPU])
}

// waitDepth waits until the index holds want blocks of prompt.
func (r *mmRig) waitDepth(t *testing.T, prompt []uint32, keys *kvstore.Keys, want int) {
	t.Helper()
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := r.depth(t, prompt, keys); n != want {
			return fmt.Errorf("the index holds %d blocks of the prompt, want %d (skipped %+v)", n, want, r.b.T.Skipped())
		}
		return nil
	})
}

// TestMultimodalThroughBridge: a GENERATE with an image reaches the fake
// vLLM as a render of the image (its uuid kvgate's content id) and a
// tokens-in request whose features name that id over kvgate's placeholder
// run; the tokens come back; the fake's KV events, their extra keys
// carrying the id, give the router's index exactly the blocks kvgate's own
// hasher computes for that prompt and image, and none of the same text
// with another image.
func TestMultimodalThroughBridge(t *testing.T) {
	r := startMMRig(t, fixedTokens)
	img := []byte("\x89PNG not really, but the fake only hashes it")
	media, mm := image(img, 3)
	prompt := mmPrompt()
	toks, e := r.generate(t, 1, prompt, []wire.MediaItem{media}, []wire.MMItem{mm})
	if e != nil {
		t.Fatalf("ERROR %v %q", e.Code, e.Message)
	}
	if want := vllmtest.Generated(prompt, 3); !slices.Equal(toks, want) {
		t.Fatalf("tokens %v, want %v", toks, want)
	}
	id := hex.EncodeToString(media.ID[:])
	if d, ok := r.f.ImageOf(id); !ok || d != sha256.Sum256(img) {
		t.Fatalf("the fake got no image, or another, under kvgate's id %s", id)
	}
	r.waitDepth(t, prompt, kvKeys(mm), 5)
	other, _ := image([]byte("another image"), 3)
	if n := r.depth(t, prompt, &kvstore.Keys{MM: []kvstore.MMItem{{Offset: 3, Length: imageTokens, Hash: other.Key()}}}); n != 0 {
		t.Fatalf("the same text with another image matches %d blocks, want 0", n)
	}
	if n := r.depth(t, prompt, nil); n != 0 {
		t.Fatalf("the text alone matches %d blocks, want 0", n)
	}
	if s := r.b.T.Skipped(); s != (vllm.Skipped{}) {
		t.Fatalf("skipped %+v", s)
	}
	if got, err := r.f.KVHashes(r.h, nil); err != nil || got.Blocks[wire.TierGPU] != uint64(r.b.T.Blocks(0)) {
		t.Fatalf("the fake holds %+v (%v), the bridge translated %d", got, err, r.b.T.Blocks(0))
	}
}

// TestMultimodalRefusals: what the bridge cannot forward faithfully fails
// the stream, naming why: an image vLLM's processor gives another
// placeholder count than kvgate placed (after the render; nothing runs),
// and logprobs on a prompt with images (before any call).
func TestMultimodalRefusals(t *testing.T) {
	r := startMMRig(t, fixedTokens)
	prompt := mmPrompt()
	media, mm := image([]byte("an image"), 3)
	mm.Length = imageTokens - 2 // kvgate's rule disagrees with the engine's
	short := append(append([]uint32(nil), prompt[:3+imageTokens-2]...), prompt[3+imageTokens:]...)
	_, e := r.generate(t, 1, short, []wire.MediaItem{media}, []wire.MMItem{mm})
	if e == nil || e.Code != wire.CodeStreamFailed || !strings.Contains(e.Message, "makes 10 placeholder tokens, kvgate placed 8") {
		t.Fatalf("a placeholder count the engine disagrees with: %+v", e)
	}
	if n := len(r.f.Requests()); n != 0 {
		t.Fatalf("%d requests reached the tokens-in endpoint", n)
	}
	// The render that disagreed is not kept: the image is rendered again.
	if _, e := r.generate(t, 3, short, []wire.MediaItem{media}, []wire.MMItem{mm}); e == nil || !slices.Equal(r.f.Renders(), []int{1, 1}) {
		t.Fatalf("again: %+v, renders %v, want the image rendered again", e, r.f.Renders())
	}
	media, mm = image([]byte("an image"), 3)
	g := &wire.Generate{RequestID: []byte("lp"), Model: []byte("m"), MaxTokens: 3, TopP: 1, Flags: wire.GenSampling,
		Sampling: wire.Sampling{Flags: wire.SampleLogprobs, TopLogprobs: 2, RepetitionPenalty: 1},
		Prompt:   wire.TokensOf(prompt), MMItems: wire.MMItemsOf([]wire.MMItem{mm}), Media: wire.MediaOf([]wire.MediaItem{media})}
	if err := r.c.SendGenerate(2, g); err != nil {
		t.Fatal(err)
	}
	for {
		f := r.read(t)
		if f.Stream != 2 || f.Type != wire.TypeError {
			continue
		}
		var e wire.Error
		if err := wire.DecodeFrame(f, &e, nil); err != nil || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, "logprobs") {
			t.Fatalf("logprobs with an image: %+v %v", e, err)
		}
		break
	}
}

// TestFakeChecksMultimodalRequests: the fake refuses, as vLLM's pydantic
// models would (and, for unknown fields, more strictly: vLLM ignores
// them), what the bridge must never send: the checks the end-to-end test
// relies on can fail.
func TestFakeChecksMultimodalRequests(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 100, vllmtest.Tagged, vllmtest.WithMultimodal(func([]byte) int { return 2 }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(f.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	img := `data:image/png;base64,` + base64.StdEncoding.EncodeToString([]byte("img"))
	code, body := post("/v1/chat/completions/render", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"`+img+`"},"uuid":"`+mmX+`"}]}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"mm_hashes":{"image":["`+mmX+`"]}`) {
		t.Fatalf("render: %d %s", code, body)
	}
	var rendered struct {
		Features struct {
			KwargsData map[string][]string `json:"kwargs_data"`
		} `json:"features"`
	}
	if err := json.Unmarshal([]byte(body), &rendered); err != nil || len(rendered.Features.KwargsData["image"]) != 1 {
		t.Fatalf("render: %v %s", err, body)
	}
	kw := rendered.Features.KwargsData["image"][0]
	good := `{"request_id":"r","token_ids":[1,9,9,2],"features":{"mm_hashes":{"image":["` + mmX + `"]},` +
		`"mm_placeholders":{"image":[{"offset":1,"length":2}]},"kwargs_data":{"image":["` + kw + `"]}},` +
		`"sampling_params":{"max_tokens":2,"temperature":0,"detokenize":false},"model":"m","stream":true}`
	if code, body := post("/inference/v1/generate", good); code != http.StatusOK || !strings.Contains(body, "[DONE]") {
		t.Fatalf("a good request: %d %s", code, body)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"unknown field", `"model":"m"`, `"model":"m","multi_modal_data":{}`, "multi_modal_data: unknown field"},
		{"unknown sampling field", `"detokenize":false`, `"detokenise":false`, "sampling_params: detokenise: unknown field"},
		{"wrong type", `"token_ids":[1,9,9,2]`, `"token_ids":["1","9","9","2"]`, "token_ids: 0: want an integer"},
		{"float for an int", `"max_tokens":2`, `"max_tokens":2.0`, "max_tokens: want an integer"},
		{"missing field", `"sampling_params":{"max_tokens":2,"temperature":0,"detokenize":false},`, ``, "sampling_params: field required"},
		{"zero length", `"length":2`, `"length":0`, "length: 0 is below 1"},
		{"lists apart", `"mm_hashes":{"image":["` + mmX + `"]}`, `"mm_hashes":{"image":["` + mmX + `","` + mmY + `"]}`, "must list the same items"},
		{"run outside the prompt", `"offset":1`, `"offset":3`, "inside the 4-token prompt"},
		{"processed data of another size", `"length":2`, `"length":3`, "Attempted to assign 2 multimodal tokens to 3 placeholders"},
		{"not processed", `"kwargs_data":{"image":["` + kw + `"]}`, `"kwargs_data":{"image":[null]}`, "not in the fake's cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(good, c.from, c.to, 1)
			if bad == good {
				t.Fatalf("%q not in the request", c.from)
			}
			if code, body := post("/inference/v1/generate", bad); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Fatalf("%d %s, want 400 naming %q", code, body, c.want)
			}
		})
	}
	if code, body := post("/v1/chat/completions/render", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"`+img+`"},"uid":"x"}]}]}`); code != http.StatusBadRequest || !strings.Contains(body, "uid: unknown field") {
		t.Fatalf("render with a misspelt uuid: %d %s", code, body)
	}
}

// TestMultimodalTurns: a conversation's second turn, its first turn's
// prompt and answer then text and a second image, reuses the first turn's
// blocks (a long image over twelve of them, down to 39 tokens before a
// block's start) and adds its own, whose events chain from them: the
// router's index holds every full block of each turn's prompt with both
// images as kvgate hashes them.
func TestMultimodalTurns(t *testing.T) {
	counts := map[string]int{"a long image": 40, "a second image": imageTokens}
	r := startMMRig(t, func(b []byte) int { return counts[string(b)] })
	long, mmLong := image([]byte("a long image"), 3)
	mmLong.Length = 40
	turn1 := append([]uint32{11, 12, 13}, slices.Repeat([]uint32{9}, 40)...)
	turn1 = append(turn1, 21, 22, 23, 24, 25, 26, 27)
	before := r.f.Blocks()
	toks, e := r.generate(t, 1, turn1, []wire.MediaItem{long}, []wire.MMItem{mmLong})
	if e != nil {
		t.Fatalf("turn 1: ERROR %v %q", e.Code, e.Message)
	}
	r.waitDepth(t, turn1, kvKeys(mmLong), len(turn1)/4)
	turn2 := append(append(slices.Clone(turn1), toks...), 31, 32)
	second, mmSecond := image([]byte("a second image"), uint32(len(turn2)))
	turn2 = append(append(turn2, slices.Repeat([]uint32{9}, imageTokens)...), 41, 42, 43, 44, 45)
	if _, e := r.generate(t, 2, turn2, []wire.MediaItem{long, second}, []wire.MMItem{mmLong, mmSecond}); e != nil {
		t.Fatalf("turn 2: ERROR %v %q", e.Code, e.Message)
	}
	if got := r.f.Renders(); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("renders of %v images, want turn 2's first image taken from the bridge's cache", got)
	}
	if n := r.f.Blocks() - before; n != len(turn2)/4 {
		t.Fatalf("the engine holds %d blocks of the two turns, want turn 2's %d (turn 1's shared)", n, len(turn2)/4)
	}
	r.waitDepth(t, turn2, kvKeys(mmLong, mmSecond), len(turn2)/4)
	if s := r.b.T.Skipped(); s != (vllm.Skipped{}) {
		t.Fatalf("skipped %+v", s)
	}
}
