package vllm

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// A GENERATE with images (wire.FeatureMultimodal, announced when
// Engine.Multimodal is set) reaches vLLM in two calls, because no vLLM
// endpoint takes a prompt of token ids together with raw images
// (/v1/completions has no multimodal field; /v1/chat/completions takes
// messages, which the bridge does not have):
//
//  1. POST /v1/chat/completions/render with one user message holding only
//     the images, as image_url parts with data: URLs and kvgate's content
//     id (hex) as each part's uuid. vLLM runs its processor on them and
//     answers a GenerateRequest whose features carry, per image, the
//     processed tensors (kwargs_data, opaque here) and the placeholder run
//     vLLM made for it; its token ids are not used.
//  2. POST /inference/v1/generate (vLLM's tokens-in endpoint) with kvgate's
//     prompt, placeholders already expanded, and features of kvgate's own:
//     mm_hashes are the content ids' hex, mm_placeholders the GENERATE's
//     MMItems, kwargs_data step 1's. vLLM takes the hashes verbatim as the
//     items' identifiers, so its block hashes and the extra keys of its KV
//     events carry kvgate's ids (multimodal_events.go reads them back).
//
// Sources, vllm-project/vllm at 0001948bc76939369ca855c90b36d81256477e85:
// vllm/entrypoints/serve/render/serving.py (render_chat_request,
// _extract_mm_features), vllm/entrypoints/serve/disagg/serving.py
// (ServingTokens.serve_tokens: mm_input(prompt_token_ids=token_ids,
// mm_hashes=features.mm_hashes, ...)) and disagg/protocol.py
// (GenerateRequest, MultiModalFeatures, PlaceholderRangeInfo). A vLLM
// placeholder run whose length differs from kvgate's MMItem fails the
// stream: kvgate's processor rule and the engine's disagree, and the
// blocks would be hashed over the wrong tokens. So does a render without
// kwargs_data (vLLM's first render endpoint, render/serving.py at
// 9f0eedbc7393c6fbd331caed7224d43ba79d1ebc, returned metadata only), and
// vLLM without the endpoints answers 404. The runs carry no is_embed mask
// (the newest PlaceholderRangeInfo has one; the render above fills none):
// models whose run holds non-embedding tokens (Gemma 3's and Llama 4's
// image start and end) fail in vLLM on this path.

// renderPath and generatePath are vLLM's render and tokens-in endpoints.
const (
	renderPath   = "/v1/chat/completions/render"
	generatePath = "/inference/v1/generate"
)

// maxRenderBytes bounds a render answer: the processed tensors of the
// request's images, base64 in JSON.
const maxRenderBytes = 1 << 30

// renderRequest is the chat request rendered for its images alone.
type renderRequest struct {
	Model    string          `json:"model"`
	Messages []renderMessage `json:"messages"`
}

type renderMessage struct {
	Role    string      `json:"role"`
	Content []imagePart `json:"content"`
}

// imagePart is an OpenAI image_url content part with vLLM's uuid
// (vllm/entrypoints/chat_utils.py: ChatCompletionContentPartImageParam
// plus "uuid", the item's multi_modal_uuids entry).
type imagePart struct {
	Type     string   `json:"type"`
	ImageURL imageURL `json:"image_url"`
	UUID     string   `json:"uuid"`
}

type imageURL struct {
	URL string `json:"url"`
}

// mmFeatures is vLLM's MultiModalFeatures, images only.
type mmFeatures struct {
	MMHashes       map[string][]string           `json:"mm_hashes"`
	MMPlaceholders map[string][]placeholderRange `json:"mm_placeholders"`
	KwargsData     map[string][]*string          `json:"kwargs_data"`
}

// placeholderRange is vLLM's PlaceholderRangeInfo.
type placeholderRange struct {
	Offset uint32 `json:"offset"`
	Length uint32 `json:"length"`
}

// renderResponse is the part of the render's GenerateRequest the bridge
// reads.
type renderResponse struct {
	Features *mmFeatures `json:"features"`
}

// tokensInRequest is vLLM's GenerateRequest as the bridge sends it.
type tokensInRequest struct {
	RequestID      string         `json:"request_id,omitempty"`
	TokenIDs       []uint32       `json:"token_ids"`
	Features       *mmFeatures    `json:"features"`
	SamplingParams tokensSampling `json:"sampling_params"`
	Model          string         `json:"model"`
	Stream         bool           `json:"stream"`
	StreamOptions  map[string]any `json:"stream_options"`
	CacheSalt      string         `json:"cache_salt,omitempty"`
	Priority       int32          `json:"priority,omitempty"`
}

// tokensSampling are vLLM's SamplingParams fields of a completion request
// (vllm/sampling_params.py; the same names as CompletionRequest's). The
// prompt is never detokenized: kvgate stops on token ids only.
type tokensSampling struct {
	MaxTokens         uint32             `json:"max_tokens"`
	Temperature       float32            `json:"temperature"`
	TopP              float32            `json:"top_p,omitempty"`
	TopK              int32              `json:"top_k,omitempty"`
	Seed              *uint64            `json:"seed,omitempty"`
	StopTokenIDs      []uint32           `json:"stop_token_ids,omitempty"`
	IgnoreEOS         bool               `json:"ignore_eos,omitempty"`
	MinTokens         uint32             `json:"min_tokens,omitempty"`
	PresencePenalty   *float32           `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float32           `json:"frequency_penalty,omitempty"`
	RepetitionPenalty *float32           `json:"repetition_penalty,omitempty"`
	LogitBias         map[string]float32 `json:"logit_bias,omitempty"`
	Detokenize        bool               `json:"detokenize"`
}

// checkMedia refuses images the bridge cannot forward (serve checked the
// media against the MMItems: wire.CheckMedia): logprobs, chat-shaped on the
// tokens-in endpoint, are not read back; an image needs its media type for
// its data: URL; vLLM wants placeholder runs sorted and apart.
func checkMedia(g *wire.Generate, c *completionRequest) error {
	bad := func(format string, args ...any) error {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
	}
	if c.Logprobs != nil {
		return bad("the bridge returns no logprobs for prompts with images")
	}
	for i := range g.MMItems.Len() {
		if len(g.Media.At(i).MIME) == 0 {
			return bad("media item %d has no media type", i)
		}
		if i > 0 {
			if prev, it := g.MMItems.At(i-1), g.MMItems.At(i); uint64(prev.Offset)+uint64(prev.Length) > uint64(it.Offset) {
				return bad("multimodal items %d and %d overlap or are out of order", i-1, i)
			}
		}
	}
	return nil
}

// image is one of a GENERATE's images, copied: like the rest of the
// GENERATE its bytes are valid only during Generate (wire/serve).
type image struct {
	id   [16]byte
	mime string
	data []byte
}

func imagesOf(g *wire.Generate) []image {
	out := make([]image, g.Media.Len())
	for i := range out {
		m := g.Media.At(i)
		out[i] = image{id: m.ID, mime: string(m.MIME), data: append([]byte(nil), m.Data...)}
	}
	return out
}

// renderOf is the render request of images.
func renderOf(model string, images []image) *renderRequest {
	parts := make([]imagePart, len(images))
	for i, m := range images {
		parts[i] = imagePart{Type: "image_url", UUID: hex.EncodeToString(m.id[:]),
			ImageURL: imageURL{URL: "data:" + m.mime + ";base64," + base64.StdEncoding.EncodeToString(m.data)}}
	}
	return &renderRequest{Model: model, Messages: []renderMessage{{Role: "user", Content: parts}}}
}

// tokensRequest is the tokens-in request of a completion request c (its
// prompt and sampling) with g's images.
func tokensRequest(c *completionRequest, g *wire.Generate) *tokensInRequest {
	n := g.MMItems.Len()
	f := &mmFeatures{MMHashes: map[string][]string{"image": make([]string, n)},
		MMPlaceholders: map[string][]placeholderRange{"image": make([]placeholderRange, n)}}
	for i := range n {
		it, m := g.MMItems.At(i), g.Media.At(i)
		f.MMHashes["image"][i] = hex.EncodeToString(m.ID[:])
		f.MMPlaceholders["image"][i] = placeholderRange{Offset: it.Offset, Length: it.Length}
	}
	return &tokensInRequest{RequestID: c.RequestID, TokenIDs: c.Prompt, Features: f, Model: c.Model, Stream: true,
		StreamOptions: c.StreamOptions, CacheSalt: c.CacheSalt, Priority: c.Priority,
		SamplingParams: tokensSampling{MaxTokens: c.MaxTokens, Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK,
			Seed: c.Seed, StopTokenIDs: c.StopTokenIDs, IgnoreEOS: c.IgnoreEOS, MinTokens: c.MinTokens,
			PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty, RepetitionPenalty: c.RepetitionPenalty,
			LogitBias: c.LogitBias}}
}

// processedOf reads a render's n processed images, or says why it holds
// something else.
func processedOf(r *renderResponse, n int) ([]processed, error) {
	f := r.Features
	if f == nil {
		return nil, fmt.Errorf("the engine's render has no multimodal features: is the model multimodal?")
	}
	ph, kw := f.MMPlaceholders["image"], f.KwargsData["image"]
	if len(f.MMPlaceholders) != 1 || len(ph) != n || len(kw) != n {
		return nil, fmt.Errorf("the engine rendered %d placeholder runs and %d processed items for %d images", len(ph), len(kw), n)
	}
	out := make([]processed, n)
	for i := range out {
		if kw[i] == nil {
			return nil, fmt.Errorf("image %d: the engine's render has no processed data", i)
		}
		out[i] = processed{tokens: ph[i].Length, data: *kw[i]}
	}
	return out, nil
}

// fill takes the processed images into req, or says why they do not fit
// kvgate's placement of them.
func fill(req *tokensInRequest, ps []processed) error {
	want := req.Features.MMPlaceholders["image"]
	kw := make([]*string, len(ps))
	for i := range ps {
		if ps[i].tokens != want[i].Length {
			return fmt.Errorf("image %d: the engine's processor makes %d placeholder tokens, kvgate placed %d (different processor settings?)",
				i, ps[i].tokens, want[i].Length)
		}
		kw[i] = &ps[i].data
	}
	req.Features.KwargsData = map[string][]*string{"image": kw}
	return nil
}

// render returns what the engine's processor makes of each image: those
// e.Renders keeps from it, the others rendered in one call (and kept). On
// failure the stream has failed.
func (e *Engine) render(ctx context.Context, k serve.Key, model string, images []image) ([]processed, bool) {
	out := make([]processed, len(images))
	var miss []int
	var todo []image
	for i, im := range images {
		p, ok := e.Renders.get(im.id)
		if out[i] = p; !ok {
			miss, todo = append(miss, i), append(todo, im)
		}
	}
	if len(todo) == 0 {
		return out, true
	}
	resp, ok := e.post(ctx, k, renderPath, renderOf(model, todo), -1)
	if !ok {
		return nil, false
	}
	var r renderResponse
	err := json.NewDecoder(io.LimitReader(resp.Body, maxRenderBytes)).Decode(&r)
	resp.Body.Close()
	var ps []processed
	if err == nil {
		ps, err = processedOf(&r, len(todo))
	}
	if err != nil {
		e.Out.Fail(k, wire.CodeStreamFailed, "rendering the images: "+err.Error())
		return nil, false
	}
	for j, i := range miss {
		out[i] = ps[j]
		e.Renders.put(images[i].id, ps[j])
	}
	return out, true
}

// generateMultimodal starts a GENERATE with images.
func (e *Engine) generateMultimodal(k serve.Key, g *wire.Generate) error {
	if g.LoRAID != 0 && e.Residency != nil {
		return &serve.StreamError{Code: wire.CodeBadRequest, Message: "the bridge forwards no images to adapters it loads at run time"}
	}
	c, rank, err := e.completionBody(g)
	if err != nil {
		return err
	}
	if err := checkMedia(g, c); err != nil {
		return err
	}
	images, req := imagesOf(g), tokensRequest(c, g)
	ctx := wire.WithTrace(e.reqs.Start(k), g)
	go e.runMultimodal(ctx, k, images, req, rank)
	return nil
}

// runMultimodal renders the images, then streams the tokens-in completion
// req and relays it.
func (e *Engine) runMultimodal(ctx context.Context, k serve.Key, images []image, req *tokensInRequest, rank int) {
	defer e.reqs.Done(k)
	ps, ok := e.render(ctx, k, req.Model, images)
	if !ok {
		return
	}
	if err := fill(req, ps); err != nil {
		for _, im := range images {
			e.Renders.drop(im.id) // maybe kept from an engine with other settings
		}
		e.Out.Fail(k, wire.CodeStreamFailed, "rendering the images: "+err.Error())
		return
	}
	resp, ok := e.post(ctx, k, generatePath, req, rank)
	if !ok {
		return
	}
	defer resp.Body.Close()
	s := relay{e: e, k: k, topN: -1}
	end, err := decodeSSE(resp.Body, s.chunk)
	e.ended(ctx, k, end, err, s.finish)
}
