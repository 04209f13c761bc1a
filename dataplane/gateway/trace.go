package gateway

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvgate/kvgate/dataplane/api"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/wire"
)

// A traced request is one server span, "<METHOD> <path>" (the method
// alone for a path kvgate does not serve), continuing the client's trace
// when it sent a valid traceparent, with children:
//
//	parse     from the request's arrival to its decoded body
//	tokenize  rendering and tokenizing the prompt
//	route     each routing decision (one per attempt)
//	engine    each attempt on an engine, from GENERATE to its end: the
//	          engines' own spans are its children (the trace section of
//	          GENERATE, PROTOCOL.md 6.1, names it as their parent)
//	stream    from an attempt's first token to its end
//
// Attribute names follow OpenTelemetry's semantic conventions where they
// have one (HTTP, gen_ai.*), kvgate.* otherwise.

// Attribute keys of kvgate's spans.
const (
	attrModel      = attribute.Key("gen_ai.request.model")
	attrInput      = attribute.Key("gen_ai.usage.input_tokens")
	attrOutput     = attribute.Key("gen_ai.usage.output_tokens")
	attrCached     = attribute.Key("kvgate.cached_tokens")
	attrPredicted  = attribute.Key("kvgate.predicted_cached_tokens")
	attrEngine     = attribute.Key("kvgate.engine")
	attrPolicy     = attribute.Key("kvgate.policy")
	attrRequestID  = attribute.Key("kvgate.request_id")
	attrRank       = attribute.Key("kvgate.dp_rank")
	attrTTFT       = attribute.Key("kvgate.ttft_ms")
	attrRetry      = attribute.Key("kvgate.retry")
	attrStatusCode = attribute.Key("http.response.status_code")
)

// startSpan starts the request's server span, a child of the client's
// traceparent when it had one.
func (x *exchange) startSpan(r *httpx.Request) {
	if x.o.Tracer == nil {
		return
	}
	name := r.Method // an unknown path is not a span name: names stay few (semantic conventions)
	if _, known := routes[r.Path]; known {
		name += " " + r.Path
	}
	x.ctx, x.span = x.o.Tracer.Start(x.o.ctxOf(x.traced), name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(x.start), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.Path),
			attribute.String("client.address", r.RemoteAddr), attrRequestID.String(x.id)))
}

// ctxOf is the context of a request whose client sent trace t: its
// span is the remote parent of the request's (none when t is invalid).
func (o *Observer) ctxOf(t wire.Trace) context.Context {
	ctx := context.Background()
	if !t.Valid() {
		return ctx
	}
	ts, err := trace.ParseTraceState(string(t.State))
	if err != nil {
		ts = trace.TraceState{} // W3C: a tracestate that does not parse is dropped, the traceparent kept
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: t.TraceID, SpanID: t.ParentID, TraceFlags: trace.TraceFlags(t.Flags), TraceState: ts, Remote: true}))
}

// recording reports whether the request's span is recorded (sampled):
// the steps of one that is not make no spans.
func (x *exchange) recording() bool { return x.span != nil && x.span.IsRecording() }

// traceOf is the trace section naming sc as the parent, with the
// client's tracestate.
func traceOf(sc trace.SpanContext, state []byte) wire.Trace {
	return wire.Trace{TraceID: sc.TraceID(), ParentID: sc.SpanID(), Flags: byte(sc.TraceFlags()), State: state}
}

// spanContext is the request span's context: the trace an access line
// names. Invalid without a tracer.
func (x *exchange) spanContext() trace.SpanContext {
	if x.span == nil {
		return trace.SpanContext{}
	}
	return x.span.SpanContext()
}

// endSpan ends the request's span with what the request came to.
func (x *exchange) endSpan(rec *accessRecord, status int) {
	if x.span == nil {
		return
	}
	model, kind, stream := rec.describe()
	x.span.SetAttributes(attrStatusCode.Int(status), attrModel.String(model), attrEngine.String(rec.engine),
		attrPolicy.String(string(x.o.Policy)), attrInput.Int(rec.prompt), attrOutput.Int(rec.completion),
		attrCached.Int(rec.cached), attribute.String("kvgate.api", kind), attribute.Bool("kvgate.stream", stream))
	if status >= 500 { // a server span's 4xx is the client's error (semantic conventions)
		x.span.SetStatus(codes.Error, rec.err)
	}
	x.span.End()
}

// phase records a finished step of the request as a span from t0 to t1.
func (x *exchange) phase(name string, t0, t1 time.Time, e *api.Error) {
	if !x.recording() {
		return
	}
	_, s := x.o.Tracer.Start(x.ctx, name, trace.WithTimestamp(t0))
	if e != nil {
		s.SetStatus(codes.Error, e.Message)
	}
	s.End(trace.WithTimestamp(t1))
}

// routeSpan records a routing decision from t0.
func (x *exchange) routeSpan(t0 time.Time, d *route.Decision, err error) {
	if !x.recording() {
		return
	}
	_, s := x.o.Tracer.Start(x.ctx, "route", trace.WithTimestamp(t0), trace.WithAttributes(attrPolicy.String(string(x.o.Policy))))
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	} else {
		s.SetAttributes(attrEngine.String(d.Engine.Info().ID), attrPredicted.Int(d.PredictedCached), attrRank.Int(int(d.Rank)))
	}
	s.End()
}

// attemptObs follows one attempt of an observed request on an engine.
type attemptObs struct {
	x              *exchange
	sent           time.Time
	engine, stream trace.Span // nil without a tracer
}

// startAttempt starts observing an attempt on d's engine and puts the
// trace context in gen: the engine span's when tracing, else the client's
// traceparent as it came, and none for an engine that did not announce
// wire.FeatureTrace or a request without a trace.
func (x *exchange) startAttempt(gen *wire.Generate, d *route.Decision) *attemptObs {
	gen.Flags &^= wire.GenTrace
	gen.Trace = wire.Trace{}
	if x == nil {
		return nil
	}
	a := &attemptObs{x: x, sent: time.Now()}
	tc := x.traced
	switch {
	case x.recording():
		info := d.Engine.Info()
		_, a.engine = x.o.Tracer.Start(x.ctx, "engine", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attrEngine.String(info.ID), attribute.String("server.address", d.Engine.Addr), attrRank.Int(int(d.Rank))))
		tc = traceOf(a.engine.SpanContext(), x.traced.State)
	case x.span != nil: // not sampled: the engine is told so, under the request's span
		tc = traceOf(x.span.SpanContext(), x.traced.State)
	}
	if tc.Valid() && d.Engine.Features()&wire.FeatureTrace != 0 {
		gen.Flags |= wire.GenTrace
		gen.Trace = tc
	}
	return a
}

// firstToken records the attempt's first token: the request's time to
// first token (from its arrival) and the tokens the engine had cached.
func (a *attemptObs) firstToken(cached uint32) {
	if a == nil {
		return
	}
	now := time.Now()
	a.x.update(func(r *accessRecord) {
		if r.ttft == 0 { // the first choice's (fanout.go)
			r.ttft, r.cached = now.Sub(a.x.start), int(cached)
		}
	})
	if a.engine != nil {
		a.engine.AddEvent("first_token", trace.WithTimestamp(now))
		a.engine.SetAttributes(attrCached.Int(int(cached)), attrTTFT.Float64(ms(now.Sub(a.sent))))
		_, a.stream = a.x.o.Tracer.Start(a.x.ctx, "stream", trace.WithTimestamp(now))
	}
}

// lateCached records the cached tokens an engine reported only with its
// last frame (vLLM's final usage, through the bridge), in place of the
// first frame's.
func (a *attemptObs) lateCached(cached uint32) {
	if a == nil {
		return
	}
	a.x.update(func(r *accessRecord) { r.cached = int(cached) })
	if a.engine != nil {
		a.engine.SetAttributes(attrCached.Int(int(cached)))
	}
}

// end ends the attempt: status and retry as the attempt returned them,
// completion the tokens it streamed (its usage when the engine sent it).
func (a *attemptObs) end(status int, retry bool, err error, completion int) {
	if a == nil {
		return
	}
	if !retry {
		a.x.update(func(r *accessRecord) { r.completion += completion })
	}
	if a.engine == nil {
		return
	}
	a.engine.SetAttributes(attrOutput.Int(completion), attrRetry.Bool(retry))
	switch {
	case err != nil:
		a.engine.SetStatus(codes.Error, err.Error())
	case status >= 500:
		a.engine.SetStatus(codes.Error, "status "+strconv.Itoa(status))
	}
	if a.stream != nil {
		a.stream.SetAttributes(attrOutput.Int(completion))
		a.stream.End()
	}
	a.engine.End()
}
