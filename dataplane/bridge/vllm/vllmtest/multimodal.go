package vllmtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// A fake started WithMultimodal serves a vision model's two endpoints the
// bridge uses for images (../multimodal.go): POST
// /v1/chat/completions/render "processes" each image part (its placeholder
// count is the option's function of the image's bytes; its processed data
// a msgpack stand-in for MultiModalKwargsItem, base64 in kwargs_data), and
// POST /inference/v1/generate serves token ids with those features: the
// items' identifiers are mm_hashes as given, and they enter the blocks'
// hashes and the BlockStored extra keys as vLLM's
// generate_block_hash_extra_keys makes them (the adapter's name, then one
// (identifier, offset - block start) pair per item overlapping the block).

// MMItem is an image in a cached prompt: vLLM's identifier of it (the
// request's mm_hashes entry) and its placeholder run.
type MMItem struct {
	Identifier     string
	Offset, Length int
}

// mmState is what WithMultimodal adds to the fake.
type mmState struct {
	// tokens is the placeholder count of an image; nil: not multimodal.
	tokens func(image []byte) int
	// images maps each identifier served to the sha256 of the image whose
	// processed data came with it.
	images map[string][32]byte
	// renders counts the images of each render call.
	renders []int
}

// WithMultimodal makes the fake a vision model whose processor gives an
// image tokens(image) placeholder tokens.
func WithMultimodal(tokens func(image []byte) int) Option {
	return func(o *options) { o.mmTokens = tokens }
}

// mmRoutes adds the multimodal endpoints when the fake is multimodal.
func (f *Fake) mmRoutes(mux *http.ServeMux) {
	if f.mm.tokens == nil {
		return
	}
	f.mm.images = map[string][32]byte{}
	mux.HandleFunc("POST /v1/chat/completions/render", f.render)
	mux.HandleFunc("POST /inference/v1/generate", f.tokensIn)
}

// ImageOf returns the sha256 of the image the fake was given under a
// multimodal identifier, and whether it was.
func (f *Fake) ImageOf(identifier string) ([32]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.mm.images[identifier]
	return d, ok
}

// Renders returns the number of images of each render call so far.
func (f *Fake) Renders() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mm.renders)
}

// processedItem is the fake's stand-in for a processed image: vLLM sends
// a msgpack MultiModalKwargsItem; the fake's says which image and how many
// placeholder tokens it fills.
type processedItem struct {
	Image  []byte `msgpack:"image_sha256"`
	Tokens int    `msgpack:"num_tokens"`
}

func encodeProcessed(image []byte, tokens int) string {
	d := sha256.Sum256(image)
	b, _ := msgpack.Marshal(processedItem{Image: d[:], Tokens: tokens})
	return base64.StdEncoding.EncodeToString(b)
}

func decodeProcessed(s string) (processedItem, error) {
	var p processedItem
	b, err := base64.StdEncoding.DecodeString(s)
	if err == nil {
		err = msgpack.Unmarshal(b, &p)
	}
	if err == nil && len(p.Image) != sha256.Size {
		err = fmt.Errorf("no image digest")
	}
	return p, err
}

// Render token layout of the fake's chat template: BOS, then per image a
// start token, its placeholders and an end token, then the generation
// prompt.
const (
	renderBOS, renderImageStart, renderPad, renderImageEnd, renderAssistant = 1, 2, 9, 3, 4
)

// render answers /v1/chat/completions/render for image parts.
func (f *Fake) render(w http.ResponseWriter, r *http.Request) {
	body, ok := decodeChecked(w, r, renderSchema)
	if !ok {
		return
	}
	model, _ := body["model"].(string)
	if _, ok := f.servedModel(w, model); !ok {
		return
	}
	toks := []uint32{renderBOS}
	var hashes, kwargs []string
	var places []map[string]int
	for _, m := range body["messages"].([]any) {
		for _, p := range m.(map[string]any)["content"].([]any) {
			part := p.(map[string]any)
			if part["type"] != "image_url" {
				continue
			}
			url, _ := part["image_url"].(map[string]any)["url"].(string)
			img, err := dataURL(url)
			if err != nil {
				badRequest(w, err.Error())
				return
			}
			n := f.mm.tokens(img)
			id, _ := part["uuid"].(string)
			if id == "" {
				d := sha256.Sum256(img)
				id = hex.EncodeToString(d[:])
			}
			places = append(places, map[string]int{"offset": len(toks) + 1, "length": n})
			toks = append(toks, renderImageStart)
			toks = append(toks, slices.Repeat([]uint32{renderPad}, n)...)
			toks = append(toks, renderImageEnd)
			hashes, kwargs = append(hashes, id), append(kwargs, encodeProcessed(img, n))
		}
	}
	toks = append(toks, renderAssistant)
	f.mu.Lock()
	f.mm.renders = append(f.mm.renders, len(hashes))
	f.mu.Unlock()
	var features any
	if len(hashes) > 0 {
		features = map[string]any{"mm_hashes": map[string]any{"image": hashes}, "mm_placeholders": map[string]any{"image": places},
			"kwargs_data": map[string]any{"image": kwargs}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"request_id": "chatcmpl-fake", "token_ids": toks, "features": features,
		"sampling_params": map[string]any{"max_tokens": 16}, "model": model, "stream": false, "stream_options": nil,
		"cache_salt": nil, "priority": 0, "kv_transfer_params": nil})
}

// dataURL decodes a base64 data: URL of an image.
func dataURL(url string) ([]byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
	if !ok || !strings.HasPrefix(url, "data:image/") || !strings.HasSuffix(meta, ";base64") {
		return nil, fmt.Errorf("image_url: the fake reads base64 data: URLs of images only, got %.40q", url)
	}
	return base64.StdEncoding.DecodeString(data)
}

// tokensReq is the typed part of a checked GenerateRequest.
type tokensReq struct {
	RequestID string   `json:"request_id"`
	TokenIDs  []uint32 `json:"token_ids"`
	Model     *string  `json:"model"`
	Features  *struct {
		MMHashes       map[string][]string `json:"mm_hashes"`
		MMPlaceholders map[string][]struct {
			Offset, Length int
		} `json:"mm_placeholders"`
		KwargsData map[string][]*string `json:"kwargs_data"`
	} `json:"features"`
	SamplingParams struct {
		MaxTokens *int `json:"max_tokens"`
	} `json:"sampling_params"`
	StreamOptions *struct {
		IncludeUsage, ContinuousUsageStats *bool
	} `json:"stream_options"`
}

// items checks the features as MultiModalFeatures' validators and the
// engine do (one modality's lists parallel, placeholder runs sorted,
// apart and inside the prompt, each item's processed data filling its
// run) and returns the prompt's images and their digests.
func (q *tokensReq) items() ([]MMItem, [][32]byte, error) {
	f := q.Features
	if f == nil {
		return nil, nil, nil
	}
	for m := range f.MMHashes {
		if m != "image" {
			return nil, nil, fmt.Errorf("features: the fake serves images only, not %q", m)
		}
	}
	hs, ph, kw := f.MMHashes["image"], f.MMPlaceholders["image"], f.KwargsData["image"]
	if len(f.MMPlaceholders) != len(f.MMHashes) || len(ph) != len(hs) || f.KwargsData == nil || len(kw) != len(hs) {
		return nil, nil, fmt.Errorf("features: mm_hashes, mm_placeholders and kwargs_data must list the same items")
	}
	var items []MMItem
	var images [][32]byte
	for i, p := range ph {
		if i > 0 && p.Offset < ph[i-1].Offset+ph[i-1].Length || p.Offset+p.Length > len(q.TokenIDs) {
			return nil, nil, fmt.Errorf("features: mm_placeholders must be sorted, apart and inside the %d-token prompt", len(q.TokenIDs))
		}
		if kw[i] == nil {
			return nil, nil, fmt.Errorf("features: image %d is not in the fake's cache (kwargs_data null)", i)
		}
		d, err := decodeProcessed(*kw[i])
		if err != nil {
			return nil, nil, fmt.Errorf("features: kwargs_data image %d: %v", i, err)
		}
		if d.Tokens != p.Length {
			return nil, nil, fmt.Errorf("Attempted to assign %d multimodal tokens to %d placeholders", d.Tokens, p.Length)
		}
		items = append(items, MMItem{Identifier: hs[i], Offset: p.Offset, Length: p.Length})
		images = append(images, [32]byte(d.Image))
	}
	return items, images, nil
}

// tokensIn answers /inference/v1/generate, streamed as vLLM's
// ServingTokens does: a chunk per token, a usage chunk, [DONE].
func (f *Fake) tokensIn(w http.ResponseWriter, r *http.Request) {
	raw, ok := decodeChecked(w, r, generateSchema)
	if !ok {
		return
	}
	var q tokensReq
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &q); err != nil {
		badRequest(w, err.Error())
		return
	}
	model := f.Model
	if q.Model != nil {
		model = *q.Model
	}
	lora, ok := f.servedModel(w, model)
	if !ok {
		return
	}
	items, images, err := q.items()
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, Request{Model: model, Prompt: q.TokenIDs, Body: raw})
	for i, it := range items {
		f.mm.images[it.Identifier] = images[i]
	}
	f.mu.Unlock()
	cached := f.admitMM(lora, q.TokenIDs, items)
	n := 16
	if p := q.SamplingParams.MaxTokens; p != nil {
		n = *p
	}
	f.streamTokens(w, r, &q, generated(q.TokenIDs, n), cached)
}

// streamTokens streams toks as GenerateStreamResponse chunks.
func (f *Fake) streamTokens(w http.ResponseWriter, r *http.Request, q *tokensReq, toks []uint32, cached int) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := sseSender(w, r)
	usage := func(n int) map[string]any {
		return map[string]any{"prompt_tokens": len(q.TokenIDs), "completion_tokens": n, "total_tokens": len(q.TokenIDs) + n}
	}
	opt := func(p *bool) bool { return p != nil && *p }
	include, continuous := q.StreamOptions != nil && opt(q.StreamOptions.IncludeUsage), q.StreamOptions != nil && opt(q.StreamOptions.ContinuousUsageStats)
	for i, tok := range toks {
		var finish any
		if i == len(toks)-1 {
			finish = "length"
		}
		c := map[string]any{"request_id": q.RequestID, "choices": []any{map[string]any{"index": 0, "logprobs": nil,
			"finish_reason": finish, "token_ids": []uint32{tok}, "routed_experts": nil}}, "usage": nil}
		if continuous {
			c["usage"] = usage(i + 1)
		}
		if !send(c) {
			return
		}
	}
	if include {
		u := usage(len(toks))
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": cached}
		if !send(map[string]any{"request_id": q.RequestID, "choices": []any{}, "usage": u}) {
			return
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
}

// blockItems is the items overlapping tokens [lo, hi) as vLLM keys a block
// with them: (identifier, offset - lo), in prompt order.
func blockItems(items []MMItem, lo, hi int) []vllm.MMKey {
	var out []vllm.MMKey
	for _, it := range items {
		if it.Offset < hi && it.Offset+it.Length > lo {
			out = append(out, vllm.MMKey{Identifier: it.Identifier, Offset: it.Offset - lo})
		}
	}
	return out
}

// hashItems writes a block's items into its engine hash, as vLLM hashes
// its extra keys with its tokens.
func hashItems(h hash.Hash, items []MMItem, lo, hi int) {
	for _, k := range blockItems(items, lo, hi) {
		h.Write([]byte(k.Identifier))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(k.Offset)))
	}
}

// blockExtras is the extra keys of blocks [from, to) of a prompt of an
// adapter ("" for none) with items: their kinds and their items, nil when
// no block has any (generate_block_hash_extra_keys: LoRA, then items).
func (f *Fake) blockExtras(lora string, items []MMItem, from, to int) ([]vllm.Extra, [][]vllm.MMKey) {
	if lora == "" && len(items) == 0 {
		return nil, nil
	}
	kinds := make([]vllm.Extra, to-from)
	var keys [][]vllm.MMKey
	for b := from; b < to; b++ {
		if lora != "" {
			kinds[b-from] |= vllm.ExtraLoRA
		}
		if k := blockItems(items, b*f.BlockSize, (b+1)*f.BlockSize); len(k) > 0 {
			if keys == nil {
				keys = make([][]vllm.MMKey, to-from)
			}
			kinds[b-from] |= vllm.ExtraMultimodal
			keys[b-from] = k
		}
	}
	return kinds, keys
}
