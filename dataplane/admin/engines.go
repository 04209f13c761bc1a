package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/passthrough"
	"github.com/kvgate/kvgate/dataplane/route"
)

// RegisterEngines adds, read at scrape time, each engine's readiness and
// the load this replica has in flight on it, and the KV index's size and
// events applied. The engines are the wire engines of pool and the HTTP
// engines of http (nil when there are none), labelled with their URL;
// kvgate does not follow an HTTP engine's decoding, so those have no
// decode series, and their prefill is the uncached prompt tokens of the
// requests not finished (RegisterPassthrough adds their own metrics). Each
// data-parallel rank of a wire engine has its own series (ranks.go).
func RegisterEngines(reg prometheus.Registerer, pool *engine.Pool, router *route.Router, http *passthrough.Pool) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_index_entries", Help: "Entries in the KV block index."},
			func() float64 { return float64(pool.Index().Stats().Entries) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_index_events_applied_total", Help: "KV events applied."},
			func() float64 { return float64(pool.EventsApplied()) }),
		&engineCollector{pool: pool, router: router, http: http},
		&rankCollector{pool: pool, router: router}, &loraCollector{pool: pool})
}

// engineCollector reports per-engine state and load at scrape time.
type engineCollector struct {
	pool   *engine.Pool
	router *route.Router
	http   *passthrough.Pool
}

var (
	descState   = prometheus.NewDesc("kvgate_engine_ready", "1 when the engine takes requests.", []string{"engine"}, nil)
	descPrefill = prometheus.NewDesc("kvgate_engine_inflight_prefill_tokens", "Prompt tokens sent and not yet past their first token.", []string{"engine"}, nil)
	descDecode  = prometheus.NewDesc("kvgate_engine_inflight_decode_tokens", "KV tokens of requests decoding.", []string{"engine"}, nil)
	descReqs    = prometheus.NewDesc("kvgate_engine_inflight_requests", "Requests in flight.", []string{"engine"}, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descState
	ch <- descPrefill
	ch <- descDecode
	ch <- descReqs
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.pool.Engines() {
		ready := 0.0
		if e.Ready() {
			ready = 1
		}
		l := c.router.Inflight(e)
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, ready, e.Addr)
		ch <- prometheus.MustNewConstMetric(descPrefill, prometheus.GaugeValue, float64(l.PrefillTokens), e.Addr)
		ch <- prometheus.MustNewConstMetric(descDecode, prometheus.GaugeValue, float64(l.DecodeTokens), e.Addr)
		ch <- prometheus.MustNewConstMetric(descReqs, prometheus.GaugeValue, float64(l.Requests), e.Addr)
	}
	if c.http == nil {
		return
	}
	for _, e := range c.http.Engines {
		ready := 0.0
		if e.Healthy() {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, ready, e.URL)
		ch <- prometheus.MustNewConstMetric(descPrefill, prometheus.GaugeValue, float64(e.InflightPrefill()), e.URL)
		ch <- prometheus.MustNewConstMetric(descReqs, prometheus.GaugeValue, float64(e.InflightRequests()), e.URL)
	}
}
