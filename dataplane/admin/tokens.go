package admin

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The gateway's per-engine token counters (dataplane/gateway/metrics.go):
// their ratio is an engine's cache hit rate.
const (
	metricEnginePrompt = "kvgate_engine_prompt_tokens_total"
	metricEngineCached = "kvgate_engine_cached_tokens_total"
)

// Tokens are an engine's prompt tokens of requests that reached their
// first token, and those of them it served from its cache, since start.
type Tokens struct {
	Prompt, Cached float64
}

// HitRate is Cached over Prompt, -1 before any prompt token.
func (t Tokens) HitRate() float64 {
	if t.Prompt <= 0 {
		return -1
	}
	return t.Cached / t.Prompt
}

// TokenCounts reads the per-engine token counters from g, by the engine
// label (an engine's address); nil g, or one without them, gives none.
func TokenCounts(g prometheus.Gatherer) map[string]Tokens {
	out := map[string]Tokens{}
	if g == nil {
		return out
	}
	families, err := g.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		name := f.GetName()
		if name != metricEnginePrompt && name != metricEngineCached {
			continue
		}
		for _, m := range f.GetMetric() {
			engine := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "engine" {
					engine = l.GetValue()
				}
			}
			t := out[engine]
			if name == metricEnginePrompt {
				t.Prompt = m.GetCounter().GetValue()
			} else {
				t.Cached = m.GetCounter().GetValue()
			}
			out[engine] = t
		}
	}
	return out
}
