package gateway

import (
	"errors"
	"fmt"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Images to engines (issue 24). Once placed (media.go), a request's
// images are routed and sent with it:
//
//   - the router hashes the prompt with one extra key per image, its
//     placeholder range and its id's Key (route.Request.Keys.MM), so its
//     block hashes are the ones the engine caches the prompt under and
//     two prompts that differ only in an image share no block from the
//     image's first block on;
//   - only engines that announce wire.FeatureMultimodal are candidates
//     (route.Request.Needs); when the model has ready engines but none
//     of them takes images, the request is a 400 naming its first image;
//   - GENERATE carries the same items (Generate.MMItems) and the images'
//     bytes (Generate.Media), item i the content of item i.
//
// Every GENERATE of the request is built by genRequest.generate, and
// every route.Request by serveOn, so each choice of n > 1 and both
// sides of a disaggregated request (the decode side's GENERATE is a copy
// of the prefill side's) carry the images. Requests for models only HTTP
// engines serve are relayed unchanged, images included (passthrough.go).

// mmKeys are req's images as block-hash extra keys: one per image, its
// placeholder range and content key, in prompt order (placement keeps
// the images' order, so the ranges are sorted by offset as
// kvstore.Keys.MM must be). Nil without images.
func (req *genRequest) mmKeys() []kvstore.MMItem {
	images := req.images()
	if len(images) == 0 {
		return nil
	}
	keys := make([]kvstore.MMItem, len(images))
	for i, im := range images {
		keys[i] = kvstore.MMItem{Offset: uint32(im.Placed.Offset), Length: uint32(im.Placed.Length), Hash: im.Resolved.ID.Key()}
	}
	return keys
}

// images are req's images (a completion has none).
func (req *genRequest) images() []api.Image {
	if req.Request == nil {
		return nil
	}
	return req.Conversation.Images
}

// routeMedia asks the router for an engine that takes images, and to
// hash the prompt with their keys.
func (req *genRequest) routeMedia(rr *route.Request) {
	if rr.Keys.MM = req.mmKeys(); rr.Keys.MM != nil {
		rr.Needs |= wire.FeatureMultimodal
	}
}

// addMedia puts req's images in gen: their placements (MMItems) and,
// item for item, their ids, types, sizes and bytes (Media; the engine
// connection sends the bytes after the GENERATE, wire PROTOCOL.md 6.11).
// The bytes are the request's own, not copied.
func (req *genRequest) addMedia(gen *wire.Generate) {
	images := req.images()
	if len(images) == 0 {
		return
	}
	items := make([]wire.MMItem, len(images))
	data := make([]wire.MediaItem, len(images))
	for i, im := range images {
		res := &im.Resolved
		items[i] = wire.MMItem{Offset: uint32(im.Placed.Offset), Length: uint32(im.Placed.Length), Hash: res.ID.Key()}
		data[i] = wire.MediaItem{ID: res.ID, MIME: []byte(res.Info.Format.MediaType()), Width: uint32(res.Info.Width),
			Height: uint32(res.Info.Height), Data: res.Data}
	}
	gen.MMItems, gen.Media = wire.MMItemsOf(items), wire.MediaOf(data)
}

// routeFailure is the client's answer when no engine could be chosen: a
// request with images that the model's ready engines cannot take is
// refused naming its first image, whatever else it needs; the rest as
// routeError says. Engines that take images but only prefill (role
// PREFILL) cannot serve one alone, and a split needs a decode side that
// takes them too: with no other engine taking images, the request is the
// same 400, saying so, not a 503 that invites the client to retry.
func (g *Gateway) routeFailure(err error, req *genRequest) *api.Error {
	images := req.images()
	if len(images) == 0 || !errors.Is(err, route.ErrNoEngine) {
		return routeError(err, req)
	}
	ready, whole, prefillOnly := 0, 0, 0 // ready; of them taking images: whole requests, prefill only
	for _, e := range g.Pool.Engines() {
		if !e.Ready() || !e.Serves(req.Model) {
			continue
		}
		ready++
		if e.Features()&wire.FeatureMultimodal == 0 {
			continue
		}
		if role, err := wire.RoleOf(e.Features()); err == nil && role == wire.RolePrefill {
			prefillOnly++
		} else {
			whole++
		}
	}
	if ready == 0 || whole > 0 {
		return routeError(err, req) // none ready (503), or the images were not what was missing
	}
	first := images[0].Field
	why := fmt.Sprintf("none of its %d ready engines announces the wire protocol's MULTIMODAL feature", ready)
	if prefillOnly > 0 {
		why = fmt.Sprintf("the %d of its %d ready engines that announce the wire protocol's MULTIMODAL feature are prefill-only, "+
			"and no engine that takes images serves a request whole or decodes one", prefillOnly, ready)
	}
	return api.BadRequest(first, fmt.Sprintf("%s: engines of model %s do not accept images (%s)", first, req.Model, why))
}

// checkMediaWire refuses images no engine can take, naming the part: an
// image over the wire protocol's bound on one media item, the image that
// takes the request's past the bound on one GENERATE's, or more images
// than a GENERATE lists (wire.DefaultLimits: what every engine accepts).
// --media-max-bytes above the item bound would otherwise let an image
// through that every engine refuses.
func checkMediaWire(images []api.Image) *api.Error {
	if n := len(images); n > wire.DefaultMaxListItems {
		im := images[wire.DefaultMaxListItems]
		return api.BadRequest(im.Field, fmt.Sprintf("%s: %d images; engines take at most %d in one request", im.Field, n, wire.DefaultMaxListItems))
	}
	total := 0
	for _, im := range images {
		n := len(im.Resolved.Data)
		if n > wire.DefaultMaxMediaItemBytes {
			return api.BadRequest(im.Field, fmt.Sprintf("%s: image too large: %d bytes, over the %d an engine takes for one image", im.Field, n, wire.DefaultMaxMediaItemBytes))
		}
		if total += n; total > wire.DefaultMaxMediaBytes {
			return api.BadRequest(im.Field, fmt.Sprintf("%s: images too large: %d bytes up to this one, over the %d an engine takes for one request's", im.Field, total, wire.DefaultMaxMediaBytes))
		}
	}
	return nil
}
