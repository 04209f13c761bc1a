package gateway

import (
	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
)

// models serves GET /v1/models: every configured model with its aliases
// (each alias an entry too), then every model and adapter an engine has
// announced that is not among them, once each; in Anthropic's shape when
// the request carries an anthropic-version header, as Anthropic's clients
// send.
func (g *Gateway) models(w *httpx.ResponseWriter, r *httpx.Request, _ string) int {
	list := g.modelList()
	if r.Header.Get("anthropic-version") != "" {
		return writeJSON(w, 200, api.EncodeAnthropicModels(list))
	}
	return writeJSON(w, 200, api.EncodeModels(list))
}

// modelList is /v1/models's entries.
func (g *Gateway) modelList() []api.Model {
	seen := map[string]bool{}
	var list []api.Model
	add := func(m api.Model) {
		if !seen[m.ID] {
			seen[m.ID] = true
			list = append(list, m)
		}
	}
	for _, m := range g.catalog().list {
		add(api.Model{ID: m.Name, Aliases: m.Aliases})
		for _, a := range m.Aliases {
			add(api.Model{ID: a, AliasOf: m.Name})
		}
	}
	for _, e := range g.Pool.Engines() {
		info := e.Info()
		for _, m := range info.Models {
			add(api.Model{ID: m})
		}
		for _, l := range info.LoRAs {
			if len(info.Models) > 0 {
				add(api.Model{ID: l.Name, Parent: info.Models[0]})
			}
		}
	}
	if g.Passthrough != nil {
		for _, e := range g.Passthrough.Engines {
			for _, m := range e.Models() {
				add(api.Model{ID: m})
			}
		}
	}
	return list
}
