package dataplane

import (
	"context"
	"errors"

	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/passthrough"
)

// passthrough serves req with an HTTP engine when no wire engine serves
// its model; ok is false when it did not take the request. The engine's
// response goes to the client unchanged; only a failure before anything
// was sent is answered in the API's error format (503).
func (g *Gateway) passthrough(w *httpx.ResponseWriter, r *httpx.Request, req *genRequest, flavor apiFlavor) (status int, ok bool) {
	if g.Passthrough == nil || g.servesWire(req.model) || !g.Passthrough.Serves(req.model) {
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
	status, _, err := g.Passthrough.Serve(ctx, w, r, req.model, req.tokens)
	if errors.Is(err, passthrough.ErrNoEngine) || errors.Is(err, passthrough.ErrUnavailable) {
		e := &apiError{status: 503, kind: "service_unavailable", message: err.Error(), retryAfter: 1}
		writeError(w, flavor, e)
		return e.status, true
	}
	if status == 0 {
		status = 502
	}
	return status, true
}
