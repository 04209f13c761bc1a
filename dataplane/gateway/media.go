package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/media"
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

// checkMedia answers a request with images. Images are read, fetched
// and checked, and their placeholder counts computed, so that a bad part
// is named (undecodable, a media type or size the bytes contradict, over
// the limit, a host not allowed, a size the processor refuses); then,
// since GENERATE cannot yet carry images to engines (issue 24: the wire
// extension comes next), the request is refused naming its first image.
// A model without a processor is refused before anything is fetched.
func (g *Gateway) checkMedia(m *Model, req *api.Request) *api.Error {
	c := &req.Conversation
	if len(c.Images) == 0 {
		return nil
	}
	model := req.Model
	if m != nil && m.Name != "" {
		model = m.Name // an adapter's base model
	}
	first := c.Images[0].Field
	var proc media.Processor
	if g.Media != nil {
		proc = g.Media.Processors[model]
	}
	if proc == nil {
		return api.BadRequest(first, fmt.Sprintf("%s: model %s has no image processor configured (kvgate --media-processor %s=PROCESSOR, one of %s)",
			first, model, model, media.ProcessorNames()))
	}
	// The request runs on its own goroutine (httpx), never an event loop;
	// the Fetcher's timeout bounds each fetch.
	if e := api.ResolveImages(context.Background(), c, &g.Media.Resolver); e != nil {
		return e
	}
	for _, im := range c.Images {
		if _, err := proc.Expand(im.Resolved.Info.Width, im.Resolved.Info.Height); err != nil {
			return api.BadRequest(im.Field, fmt.Sprintf("%s: %s: %s", im.Field, proc.Name(), strings.TrimPrefix(err.Error(), "media: ")))
		}
	}
	return api.BadRequest(first, fmt.Sprintf("%s: engines of model %s do not accept images yet (kvgate cannot send images to engines until the wire protocol carries them)",
		first, model))
}
