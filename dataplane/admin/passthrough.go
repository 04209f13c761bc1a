package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/passthrough"
)

// RegisterPassthrough adds the HTTP engines' metrics: readiness and the
// prefill kvgate has in flight on each, the responses cut short, and the
// steering mode in use.
func RegisterPassthrough(reg prometheus.Registerer, p *passthrough.Pool) {
	reg.MustRegister(&passthroughCollector{p: p})
}

type passthroughCollector struct{ p *passthrough.Pool }

var (
	descHTTPReady   = prometheus.NewDesc("kvgate_http_engine_ready", "1 when the HTTP engine answered its last /v1/models poll.", []string{"engine"}, nil)
	descHTTPPrefill = prometheus.NewDesc("kvgate_http_engine_inflight_prefill_tokens", "Uncached prompt tokens sent to the HTTP engine and not finished.", []string{"engine"}, nil)
	descSteering    = prometheus.NewDesc("kvgate_steering_mode", "1 for the mode HTTP engines' responses are relayed with.", []string{"mode"}, nil)
	descHTTPCut     = prometheus.NewDesc("kvgate_http_responses_cut_total", "Relays of the HTTP engine's responses that failed: duplicated (the kernel delivered sockmap bytes twice), truncated (the engine closed before its Content-Length), other (no header from the engine, the client gone, a reset, a deadline). Engines that refuse connections are in kvgate_http_engine_ready instead.", []string{"engine", "reason"}, nil)
)

func (c *passthroughCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descHTTPReady
	ch <- descHTTPPrefill
	ch <- descSteering
	ch <- descHTTPCut
}

func (c *passthroughCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.p.Engines {
		ready := 0.0
		if e.Healthy() {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(descHTTPReady, prometheus.GaugeValue, ready, e.URL)
		ch <- prometheus.MustNewConstMetric(descHTTPPrefill, prometheus.GaugeValue, float64(e.InflightPrefill()), e.URL)
		for _, r := range passthrough.CutReasons {
			ch <- prometheus.MustNewConstMetric(descHTTPCut, prometheus.CounterValue, float64(e.Cut(r)), e.URL, r.String())
		}
	}
	ch <- prometheus.MustNewConstMetric(descSteering, prometheus.GaugeValue, 1, string(c.p.Steer.Mode()))
}
