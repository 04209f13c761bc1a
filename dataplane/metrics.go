package dataplane

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
)

// Metrics are the gateway's Prometheus metrics.
type Metrics struct {
	Registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	e2e             prometheus.Histogram
	ttft            prometheus.Histogram
	routeSeconds    prometheus.Histogram
	predictedCached prometheus.Counter
	reportedCached  prometheus.Counter
}

// NewMetrics registers the gateway's metrics, and gauges read from the pool
// and router at scrape time.
func NewMetrics(pool *engine.Pool, router *route.Router) *Metrics {
	reg := prometheus.NewRegistry()
	latency := prometheus.ExponentialBuckets(0.0005, 2, 18)
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvgate_requests_total",
			Help: "HTTP requests by path and status."}, []string{"path", "status"}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvgate_request_duration_seconds",
			Help: "End-to-end request time.", Buckets: latency}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvgate_time_to_first_token_seconds",
			Help: "From GENERATE sent to first token received.", Buckets: latency}),
		routeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kvgate_route_decision_seconds",
			Help: "Time to hash, match, score and reserve.", Buckets: prometheus.ExponentialBuckets(1e-6, 2, 20)}),
		predictedCached: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvgate_predicted_cached_tokens_total",
			Help: "Prompt tokens the index predicted cached on the chosen engine."}),
		reportedCached: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvgate_reported_cached_tokens_total",
			Help: "Prompt tokens the engines reported served from cache."}),
	}
	reg.MustRegister(m.requests, m.e2e, m.ttft, m.routeSeconds, m.predictedCached, m.reportedCached,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_index_entries", Help: "Entries in the KV block index."},
			func() float64 { return float64(pool.Index().Stats().Entries) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_index_events_applied_total", Help: "KV events applied."},
			func() float64 { return float64(pool.EventsApplied()) }),
		&engineCollector{pool: pool, router: router})
	return m
}

func (m *Metrics) observeRequest(path string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if _, known := routes[path]; !known && path != "/health" && path != "/ready" {
		path = "other" // keep label cardinality bounded
	}
	m.requests.WithLabelValues(path, strconv.Itoa(status)).Inc()
	m.e2e.Observe(d.Seconds())
}

func (m *Metrics) firstToken(d time.Duration, predicted, reported int) {
	if m == nil {
		return
	}
	m.ttft.Observe(d.Seconds())
	m.predictedCached.Add(float64(predicted))
	m.reportedCached.Add(float64(reported))
}

// engineCollector reports per-engine state and load at scrape time.
type engineCollector struct {
	pool   *engine.Pool
	router *route.Router
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
}
