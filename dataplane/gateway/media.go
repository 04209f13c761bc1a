package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/media"
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// Media is how the gateway takes images (kvgate's --media-* flags): how
// they are fetched, limited and identified, and the image processor of
// each model that takes them.
type Media struct {
	// Resolver fetches images from the allowed hosts (none: URLs are
	// refused), bounds their bytes, and probes and identifies them.
	Resolver media.Resolver
	// Processors are the image processors of the models that take images,
	// by model name as engines announce it.
	Processors map[string]media.Processor
}

// mediaModel is the name images are configured under: an adapter's base
// model.
func mediaModel(m *Model, req *api.Request) string {
	if m != nil && m.Name != "" {
		return m.Name
	}
	return req.Model
}

// processorOf is model's image processor, nil if it has none.
func (g *Gateway) processorOf(model string) media.Processor {
	if g.Media == nil {
		return nil
	}
	return g.Media.Processors[model]
}

// checkMedia reads a request's images before its prompt is rendered:
// each is decoded or fetched, checked and identified, and its expansion
// (the processor's placeholder tokens for its size) kept on the image,
// so that a bad part is named (undecodable, a media type or size the
// bytes contradict, over the limit, a host not allowed, a size the
// processor refuses). A model without a processor is refused before
// anything is fetched.
func (g *Gateway) checkMedia(m *Model, req *api.Request) *api.Error {
	c := &req.Conversation
	if len(c.Images) == 0 {
		return nil
	}
	model := mediaModel(m, req)
	first := c.Images[0].Field
	proc := g.processorOf(model)
	if proc == nil {
		return api.BadRequest(first, fmt.Sprintf("%s: model %s has no image processor configured (kvgate --media-processor %s=PROCESSOR, one of %s)",
			first, model, model, media.ProcessorNames()))
	}
	// The request runs on its own goroutine (httpx), never an event loop;
	// the Fetcher's timeout bounds each fetch.
	if e := api.ResolveImages(context.Background(), c, &g.Media.Resolver); e != nil {
		return e
	}
	for i := range c.Images {
		im := &c.Images[i]
		exp, err := proc.Expand(im.Resolved.Info.Width, im.Resolved.Info.Height)
		if err != nil {
			return api.BadRequest(im.Field, fmt.Sprintf("%s: %s: %s", im.Field, proc.Name(), strings.TrimPrefix(err.Error(), "media: ")))
		}
		im.Expansion = exp
	}
	return checkMediaWire(c.Images) // media_send.go
}

// placeMedia expands, in a rendered and tokenized prompt, the marker
// token the chat template wrote for each image (the processor's Marker)
// into the image's placeholder tokens, in order, as vLLM's processor
// does before the engine sees the prompt, and keeps each image's range
// on it (Image.Placed). A template that dropped or repeated an image
// part, or a prompt whose text spells the marker itself, leaves a marker
// count that is not the image count: refused.
func (g *Gateway) placeMedia(m *Model, req *api.Request, ids []uint32) ([]uint32, *api.Error) {
	c := &req.Conversation
	if len(c.Images) == 0 {
		return ids, nil
	}
	model := mediaModel(m, req)
	proc := g.processorOf(model)
	if proc == nil || m == nil || m.Tok == nil {
		return nil, api.BadRequest(c.Images[0].Field, "model "+model+" has no image processor configured")
	}
	marker, ok := m.Tok.TokenID(proc.Marker())
	if !ok {
		return nil, api.BadRequest(c.Images[0].Field, fmt.Sprintf("%s: the tokenizer of model %s has no %s token, the marker of image processor %s",
			c.Images[0].Field, model, proc.Marker(), proc.Name()))
	}
	exps := make([]media.Expansion, len(c.Images))
	for i, im := range c.Images {
		exps[i] = im.Expansion
	}
	v := tokVocab{m.Tok}
	out, ranges, err := media.Place(ids, marker, exps, v)
	if tm, ok := proc.(media.TokenMerger); ok && err == nil {
		out, ranges = tm.MergeTokens(out, ranges, v) // Gemma 3's blank lines
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "media: ")
		if errors.Is(err, media.ErrPlacement) {
			msg = fmt.Sprintf("%s (the chat template of model %s writes %s for each image part; the messages' text must not spell it)", msg, model, proc.Marker())
		}
		return nil, api.BadRequest("messages", msg)
	}
	for i := range c.Images {
		c.Images[i].Placed = ranges[i]
	}
	return out, nil
}

// tokenizeChat is /tokenize's ids of a conversation: rendered and
// tokenized as a chat's, its images (if any) read and placed as a chat's
// are, so the ids are the prompt an engine would get (vLLM's /tokenize
// expands image placeholders too, since vllm-project/vllm#34560).
func (g *Gateway) tokenizeChat(name string, m *Model, tr *api.TokenizeRequest) ([]uint32, *api.Error) {
	req := &api.Request{Model: name, Conversation: tr.Conversation}
	if e := g.checkMedia(m, req); e != nil {
		return nil, e
	}
	ids, _, e := g.chatTokens(m, &req.Conversation, 0, nil)
	if e != nil {
		return nil, e
	}
	return g.placeMedia(m, req, ids)
}

// tokVocab is a tokenizer as media.Place reads it: added tokens by
// content, text runs encoded on their own without special tokens.
type tokVocab struct{ t *tokenize.Tokenizer }

func (v tokVocab) Token(s string) (uint32, bool) { return v.t.TokenID(s) }
func (v tokVocab) Encode(text string) []uint32   { return v.t.Encode(nil, text, false) }
