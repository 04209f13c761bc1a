package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the request path's Prometheus metrics: requests by path and
// status, their latency, time to first token, routing time, and the
// cached tokens the index predicted against those the engines reported.
type Metrics struct {
	requests        *prometheus.CounterVec
	e2e             prometheus.Histogram
	ttft            prometheus.Histogram
	routeSeconds    prometheus.Histogram
	predictedCached prometheus.Counter
	reportedCached  prometheus.Counter
	// enginePrompt and engineCached are, per engine, the prompt tokens of
	// requests that reached their first token and those of them the engine
	// served from cache: its hit rate (the admin status page's).
	enginePrompt, engineCached *prometheus.CounterVec
	// disaggDecisions and disaggTransfers are disaggregated serving's
	// (disagg.go): route decisions by mode, hand-offs by outcome.
	disaggDecisions, disaggTransfers *prometheus.CounterVec
}

// NewMetrics makes the gateway's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	latency := prometheus.ExponentialBuckets(0.0005, 2, 18)
	m := &Metrics{
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
		enginePrompt: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvgate_engine_prompt_tokens_total",
			Help: "Prompt tokens of the requests that reached their first token on the engine."}, []string{"engine"}),
		engineCached: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvgate_engine_cached_tokens_total",
			Help: "Of those, the tokens the engine reported served from its cache."}, []string{"engine"}),
		disaggDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvgate_disagg_decisions_total",
			Help: "Route decisions that weighed disaggregated serving, by mode (split or aggregated)."}, []string{"mode"}),
		disaggTransfers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvgate_disagg_transfers_total",
			Help: "KV hand-offs from a prefill to a decode engine, by outcome (ok, failed, timeout, cancelled)."}, []string{"outcome"}),
	}
	reg.MustRegister(m.requests, m.e2e, m.ttft, m.routeSeconds, m.predictedCached, m.reportedCached, m.enginePrompt, m.engineCached,
		m.disaggDecisions, m.disaggTransfers)
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

func (m *Metrics) observeRoute(d time.Duration) {
	if m != nil {
		m.routeSeconds.Observe(d.Seconds())
	}
}

// observeLateCached adds the cached tokens an engine reported only with
// its last frame, beyond the first frame's count (more), to the reported
// totals.
func (m *Metrics) observeLateCached(engine string, more int) {
	if m == nil || more <= 0 {
		return
	}
	m.reportedCached.Add(float64(more))
	m.engineCached.WithLabelValues(engine).Add(float64(more))
}

func (m *Metrics) observeFirstToken(engine string, prompt int, d time.Duration, predicted, reported int) {
	if m == nil {
		return
	}
	m.ttft.Observe(d.Seconds())
	m.predictedCached.Add(float64(predicted))
	m.reportedCached.Add(float64(reported))
	m.enginePrompt.WithLabelValues(engine).Add(float64(prompt))
	m.engineCached.WithLabelValues(engine).Add(float64(reported))
}
