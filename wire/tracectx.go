package wire

import "context"

// An engine that serves GENERATE by calling an HTTP server (the bridges)
// forwards the request's trace context as the W3C headers, so the HTTP
// engine's own spans join the router's trace. The trace rides the context
// of the engine's HTTP request from the GENERATE to the code that builds
// it.

type traceKey struct{}

// WithTrace returns ctx carrying g's trace section (copied out of the
// frame, whose payload is reused), or ctx itself when g has none.
func WithTrace(ctx context.Context, g *Generate) context.Context {
	if g.Flags&GenTrace == 0 || !g.Trace.Valid() {
		return ctx
	}
	t := g.Trace
	t.State = append([]byte(nil), t.State...)
	return context.WithValue(ctx, traceKey{}, &t)
}

// TraceFrom returns the trace WithTrace put in ctx.
func TraceFrom(ctx context.Context) (Trace, bool) {
	t, ok := ctx.Value(traceKey{}).(*Trace)
	if !ok {
		return Trace{}, false
	}
	return *t, true
}

// HeaderSetter is what SetTraceHeaders writes to (net/http's Header).
type HeaderSetter interface{ Set(key, value string) }

// SetTraceHeaders sets ctx's trace on h as the traceparent header, and
// tracestate when it has one; it sets nothing when ctx carries no trace.
func SetTraceHeaders(ctx context.Context, h HeaderSetter) {
	t, ok := TraceFrom(ctx)
	if !ok {
		return
	}
	h.Set("traceparent", t.Traceparent())
	if len(t.State) > 0 {
		h.Set("tracestate", string(t.State))
	}
}
