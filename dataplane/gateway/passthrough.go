package gateway

import (
	"context"
	"errors"
	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/kvstore"
)

// passthrough serves req with an HTTP engine when no wire engine serves
// its model; ok is false when it did not take the request. The engine's
// response goes to the client unchanged; only a failure before anything
// was sent is answered in the API's error format (503).
func (g *Gateway) passthrough(w *httpx.ResponseWriter, r *httpx.Request, req *genRequest, flavor api.Flavor) (status int, ok bool) {
	if g.Passthrough == nil || g.servesWire(req.Model) || !g.Passthrough.Serves(req.Model) {
		return 0, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.Gone():
			cancel()
		case <-ctx.Done():
		}
	}()
	var keys *kvstore.Keys
	if mm := req.mmKeys(); mm != nil {
		keys = &kvstore.Keys{MM: mm} // media_send.go: the images, so prompts with other images are other prefixes
	}
	status, _, err := g.Passthrough.Serve(ctx, w, r, req.Model, req.tokens, keys)
	if errors.Is(err, passthrough.ErrNoEngine) || errors.Is(err, passthrough.ErrUnavailable) {
		return writeError(w, flavor, &api.Error{Status: 503, Type: "service_unavailable", Message: err.Error(), RetryAfter: 1}), true
	}
	if status == 0 {
		status = 502
	}
	return status, true
}
