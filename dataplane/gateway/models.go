package gateway

import (
	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
)

// models serves GET /v1/models: every model and adapter an engine has
// announced, once each.
func (g *Gateway) models(w *httpx.ResponseWriter, _ *httpx.Request, _ string) int {
	seen := map[string]bool{}
	var list []api.Model
	add := func(id, parent string) {
		if !seen[id] {
			seen[id] = true
			list = append(list, api.Model{ID: id, Parent: parent})
		}
	}
	for _, e := range g.Pool.Engines() {
		info := e.Info()
		for _, m := range info.Models {
			add(m, "")
		}
		for _, l := range info.LoRAs {
			if len(info.Models) > 0 {
				add(l.Name, info.Models[0])
			}
		}
	}
	if g.Passthrough != nil {
		for _, e := range g.Passthrough.Engines {
			for _, m := range e.Models() {
				add(m, "")
			}
		}
	}
	return writeJSON(w, 200, api.EncodeModels(list))
}
