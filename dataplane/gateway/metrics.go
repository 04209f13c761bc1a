package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"
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
	// byPath and byEngine keep the children of requests (per path and
	// status) and of enginePrompt and engineCached (per engine) once
	// resolved: WithLabelValues hashes its labels and takes the vector's
	// lock on every call, about 1.5% of the router's CPU under proxybench.
	byPath   map[string]*statusCounters // every path counted by name, "other" included
	byEngine sync.Map                   // engine address -> *engineCounters
}

// statusCounters are one path's requests counters by status (100-599),
// each resolved on first use.
type statusCounters struct {
	path   string
	status [500]atomic.Pointer[prometheus.Counter]
}

// engineCounters are one engine's enginePrompt and engineCached children.
type engineCounters struct{ prompt, cached prometheus.Counter }

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
	m.byPath = map[string]*statusCounters{"/health": {path: "/health"}, "/ready": {path: "/ready"}, "other": {path: "other"}}
	for path := range routes {
		m.byPath[path] = &statusCounters{path: path}
	}
	return m
}

func (m *Metrics) observeRequest(path string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.requestCounter(path, status).Inc()
	m.e2e.Observe(d.Seconds())
}

// requestCounter is the requests child of path and status; a path the
// gateway does not serve counts as "other" (label cardinality stays
// bounded).
func (m *Metrics) requestCounter(path string, status int) prometheus.Counter {
	sc := m.byPath[path]
	if sc == nil {
		sc = m.byPath["other"]
	}
	if status < 100 || status >= 100+len(sc.status) {
		return m.requests.WithLabelValues(sc.path, strconv.Itoa(status))
	}
	slot := &sc.status[status-100]
	if c := slot.Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(sc.path, strconv.Itoa(status)) // the same child whoever stores first
	slot.Store(&c)
	return c
}

// engineCounters are engine's enginePrompt and engineCached children.
func (m *Metrics) engineCounters(engine string) *engineCounters {
	if c, ok := m.byEngine.Load(engine); ok {
		return c.(*engineCounters)
	}
	c, _ := m.byEngine.LoadOrStore(engine, &engineCounters{prompt: m.enginePrompt.WithLabelValues(engine),
		cached: m.engineCached.WithLabelValues(engine)})
	return c.(*engineCounters)
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
	m.engineCounters(engine).cached.Add(float64(more))
}

func (m *Metrics) observeFirstToken(engine string, prompt int, d time.Duration, predicted, reported int) {
	if m == nil {
		return
	}
	m.ttft.Observe(d.Seconds())
	c := m.engineCounters(engine)
	c.prompt.Add(float64(prompt))
	// Nothing cached is common (a short prompt, a cold cache); a counter's
	// Add is a compare-and-swap the CPUs contend for, even adding zero.
	if predicted > 0 {
		m.predictedCached.Add(float64(predicted))
	}
	if reported > 0 {
		m.reportedCached.Add(float64(reported))
		c.cached.Add(float64(reported))
	}
}
