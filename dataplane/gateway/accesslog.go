package gateway

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/wire"
)

// Observer records requests: a structured access line for a sample of
// them, and OpenTelemetry spans when it has a tracer (trace.go). A nil
// *Observer, or one with nothing to do, records nothing and costs a
// request no allocation; a request that carries a W3C traceparent is
// still followed so that its trace context reaches the engine.
//
// Each request observed is an exchange, from ServeHTTP's begin to its end;
// ServeHTTP's goroutine begins and ends it, and the attempts of a request
// (its choices' goroutines too, fanout.go) add to it under its lock.
type Observer struct {
	// Log receives the access lines, at Info: message "access".
	Log *slog.Logger
	// Sample is the fraction of requests logged, in [0, 1]; 0 logs none.
	// With Sample above 0, every request answered 5xx is logged too.
	Sample float64
	// Tracer makes the requests' spans; nil: no spans.
	Tracer trace.Tracer
	// Policy names the routing policy in access lines and spans.
	Policy route.Policy

	inflight sync.Map // *httpx.ResponseWriter -> *exchange, from begin to end
}

// exchange is one observed request.
type exchange struct {
	o      *Observer
	start  time.Time
	logged bool            // in the access sample
	traced wire.Trace      // the client's traceparent and tracestate; invalid: none
	ctx    context.Context // the request span's; nil without a tracer
	span   trace.Span

	mu sync.Mutex // guards what follows: choices' goroutines add to it
	accessRecord
	ended bool
}

// accessRecord is what an access line says beyond the HTTP request.
type accessRecord struct {
	id, method, path, client  string
	req                       *api.Request // nil until decoded
	engine                    string
	routes                    int
	prompt, cached, predicted int
	completion                int
	ttft                      time.Duration
	err                       string
}

// begin starts observing a request, or returns nil when nothing about it
// is to be recorded (health checks are never).
func (o *Observer) begin(w *httpx.ResponseWriter, r *httpx.Request, id string, start time.Time) *exchange {
	if o == nil || r.Path == "/health" || r.Path == "/ready" {
		return nil
	}
	client, ok := wire.ParseTraceparent(r.Header.Get("traceparent"))
	if o.Sample <= 0 && o.Tracer == nil && !ok {
		return nil
	}
	x := &exchange{o: o, start: start, logged: o.Sample >= 1 || o.Sample > 0 && rand.Float64() < o.Sample}
	x.id, x.method, x.path, x.client = id, r.Method, r.Path, r.RemoteAddr
	if ok {
		client.State = traceState(r.Header.Get("tracestate"))
		x.traced = client
	}
	x.startSpan(r) // trace.go
	o.inflight.Store(w, x)
	return x
}

// traceState is a tracestate header value a trace section can carry:
// W3C lets an intermediary drop one over its limit.
func traceState(v string) []byte {
	if v == "" || len(v) > wire.MaxTraceState {
		return nil
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return nil
		}
	}
	return []byte(v)
}

// parsed returns the observed request w answers (nil when none is) and
// records its decoded body, req (nil when it did not decode): the parse
// span ends here.
func (o *Observer) parsed(w *httpx.ResponseWriter, req *api.Request) *exchange {
	if o == nil {
		return nil
	}
	v, _ := o.inflight.Load(w)
	x, _ := v.(*exchange)
	if x == nil {
		return nil
	}
	x.update(func(r *accessRecord) { r.req = req })
	x.phase("parse", x.start, time.Now(), nil)
	return x
}

// end ends the exchange with the request's HTTP status: its span ends and,
// when it is in the sample (or failed on the server's side while the
// access log is on), its access line is written.
func (o *Observer) end(w *httpx.ResponseWriter, x *exchange, status int) {
	if x == nil {
		return
	}
	o.inflight.Delete(w)
	d := time.Since(x.start)
	x.mu.Lock()
	x.ended = true
	rec := x.accessRecord
	x.mu.Unlock()
	x.endSpan(&rec, status) // trace.go
	if o.Log == nil || !(x.logged || o.Sample > 0 && status >= 500) {
		return
	}
	model, kind, stream := rec.describe()
	attrs := []slog.Attr{
		slog.String("request", rec.id), slog.String("method", rec.method), slog.String("path", rec.path),
		slog.String("api", kind), slog.Bool("stream", stream), slog.String("client", rec.client),
		slog.String("model", model), slog.String("engine", rec.engine), slog.String("policy", string(o.Policy)),
		slog.Int("routes", rec.routes), slog.Int("prompt_tokens", rec.prompt), slog.Int("cached_tokens", rec.cached),
		slog.Int("predicted_cached_tokens", rec.predicted), slog.Int("completion_tokens", rec.completion),
		slog.Float64("ttft_ms", ms(rec.ttft)), slog.Float64("duration_ms", ms(d)), slog.Int("status", status),
	}
	if rec.err != "" {
		attrs = append(attrs, slog.String("error", rec.err))
	}
	if sc := x.spanContext(); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	o.Log.LogAttrs(context.Background(), slog.LevelInfo, "access", attrs...)
}

// describe is the decoded request's model (as served, an alias
// resolved), API and streaming; empty for a request that did not decode.
func (r *accessRecord) describe() (model, kind string, stream bool) {
	if r.req == nil {
		return "", "", false
	}
	return r.req.Model, r.req.Kind.String(), r.req.Stream
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// update applies f to the record unless the exchange has ended.
func (x *exchange) update(f func(r *accessRecord)) {
	x.mu.Lock()
	if !x.ended {
		f(&x.accessRecord)
	}
	x.mu.Unlock()
}

// now is the time a step of an observed request starts (zero, and not
// read, for a request not observed).
func (x *exchange) now() time.Time {
	if x == nil {
		return time.Time{}
	}
	return time.Now()
}

// tokenized records the prompt's tokens and the tokenize span, from t0.
func (x *exchange) tokenized(t0 time.Time, n int, e *api.Error) {
	if x == nil {
		return
	}
	x.update(func(r *accessRecord) { r.prompt = n })
	x.phase("tokenize", t0, time.Now(), e)
}

// routed records a routing decision (or its failure) and its span, from t0.
func (x *exchange) routed(t0 time.Time, d *route.Decision, err error) {
	if x == nil {
		return
	}
	x.update(func(r *accessRecord) {
		r.routes++
		if err != nil {
			r.err = err.Error()
			return
		}
		r.engine, r.predicted = d.Engine.Info().ID, d.PredictedCached
	})
	x.routeSpan(t0, d, err)
}

// failed records why the request failed, when it did not reach the client
// any other way (a route or an engine error).
func (x *exchange) failed(e *api.Error) {
	if x != nil && e != nil {
		x.update(func(r *accessRecord) { r.err = e.Message })
	}
}
