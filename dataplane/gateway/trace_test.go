package gateway

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tracing"
)

const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID      = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// tracedGateway is a test gateway whose spans go to a recorder and whose
// engines log the traceparent of each GENERATE.
type tracedGateway struct {
	*testGateway
	spans   *tracetest.SpanRecorder
	simLogs *syncBuffer
}

func startTraced(t *testing.T, ratio float64, tracer bool) *tracedGateway {
	t.Helper()
	tg := &tracedGateway{spans: tracetest.NewSpanRecorder(), simLogs: &syncBuffer{}}
	o := &Observer{Policy: route.PolicyKV}
	if tracer {
		cfg := tracing.Defaults()
		cfg.SampleRatio = ratio
		p := tracing.NewProvider(cfg, nil, sdktrace.WithSpanProcessor(tg.spans))
		t.Cleanup(func() { _ = p.Shutdown(10e9) })
		o.Tracer = p.Tracer()
	}
	simLog := slog.New(slog.NewTextHandler(tg.simLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tg.testGateway = startGatewayWith(t, gwOptions{observe: o, simLog: simLog})
	return tg
}

// chat posts a small chat request with the given traceparent ("": none).
func (tg *tracedGateway) chat(t *testing.T, traceparent string, stream bool) *http.Response {
	t.Helper()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"trace me"}],"max_tokens":3,"stream":` + strconv.FormatBool(stream) + `}`
	req, _ := http.NewRequest("POST", tg.base+"/v1/chat/completions", strings.NewReader(body))
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
		req.Header.Set("tracestate", "congo=t61rcWkgMzE")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// engineTraceparents are the traceparents the engines were sent.
func (tg *tracedGateway) engineTraceparents() []string {
	var out []string
	for _, l := range strings.Split(tg.simLogs.String(), "\n") {
		if _, tp, ok := strings.Cut(l, "traceparent="); ok && strings.Contains(l, "traced request") {
			out = append(out, strings.Fields(tp)[0])
		}
	}
	return out
}

// ended waits for the request span and returns the spans recorded by
// name; each name must occur once.
func (tg *tracedGateway) ended(t *testing.T) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	waitFor(t, func() bool {
		for _, s := range tg.spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				return true
			}
		}
		return false
	})
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range tg.spans.Ended() {
		if _, dup := byName[s.Name()]; dup {
			t.Fatalf("two %q spans", s.Name())
		}
		byName[s.Name()] = s
	}
	return byName
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// A request with the client's traceparent is a server span of the
// client's trace with parse, tokenize, route, engine and stream children;
// the engine's GENERATE names the engine span as its parent.
func TestTraceSpans(t *testing.T) {
	tg := startTraced(t, 1, true)
	resp := tg.chat(t, clientTraceparent, true)
	spans := tg.ended(t)
	root := spans["POST /v1/chat/completions"]
	if root == nil {
		t.Fatalf("no request span among %v", spans)
	}
	if root.SpanContext().TraceID().String() != clientTraceID || root.Parent().SpanID().String() != clientSpanID || !root.Parent().IsRemote() {
		t.Fatalf("request span %s, parent %s: not a child of the client's span", root.SpanContext().TraceID(), root.Parent().SpanID())
	}
	if ts := root.SpanContext().TraceState().Get("congo"); ts != "t61rcWkgMzE" {
		t.Fatalf("tracestate congo=%q", ts)
	}
	engineID := resp.Header.Get("x-kvgate-engine")
	ra := attrs(root)
	for k, want := range map[attribute.Key]any{attrModel: model, attrEngine: engineID, attrPolicy: "kv", attrOutput: int64(3),
		attrStatusCode: int64(200), "kvgate.stream": true, "kvgate.api": "chat.completions"} {
		if got := ra[k].AsInterface(); got != want {
			t.Errorf("request span %s = %v, want %v", k, got, want)
		}
	}
	if ra[attrInput].AsInt64() == 0 || ra[attrCached].Type() == attribute.INVALID {
		t.Errorf("request span tokens: input %v cached %v", ra[attrInput], ra[attrCached])
	}
	for _, name := range []string{"parse", "tokenize", "route", "engine", "stream"} {
		s := spans[name]
		if s == nil {
			t.Fatalf("no %s span among %d", name, len(spans))
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("%s span is not the request span's child", name)
		}
		if s.StartTime().Before(root.StartTime()) || s.EndTime().After(root.EndTime()) || s.EndTime().Before(s.StartTime()) {
			t.Errorf("%s span [%v, %v] outside the request's [%v, %v]", name, s.StartTime(), s.EndTime(), root.StartTime(), root.EndTime())
		}
	}
	if a := attrs(spans["route"]); a[attrEngine].AsString() != engineID || a[attrPolicy].AsString() != "kv" {
		t.Errorf("route span attributes %v", a)
	}
	eng := spans["engine"]
	if a := attrs(eng); a[attrEngine].AsString() != engineID || eng.SpanKind() != trace.SpanKindClient || len(eng.Events()) != 1 {
		t.Errorf("engine span %v, kind %v, events %v", a, eng.SpanKind(), eng.Events())
	}
	want := "00-" + clientTraceID + "-" + eng.SpanContext().SpanID().String() + "-01"
	waitFor(t, func() bool { return len(tg.engineTraceparents()) == 1 })
	if got := tg.engineTraceparents(); got[0] != want {
		t.Fatalf("the engine was sent traceparent %s, want %s (the engine span)", got[0], want)
	}
	waitInflightZero(t, tg.srv)
}

// Without a client trace, a sampled request starts a trace of its own; at
// ratio 0 none is recorded, yet the engine still gets the (unsampled)
// context, and a client's unsampled parent is followed.
func TestTraceSampling(t *testing.T) {
	tg := startTraced(t, 1, true)
	tg.chat(t, "", false)
	spans := tg.ended(t)
	if root := spans["POST /v1/chat/completions"]; root.Parent().IsValid() || len(spans) != 6 {
		t.Fatalf("a request without traceparent: parent %v, %d spans", root.Parent(), len(spans))
	}
	none := startTraced(t, 0, true)
	none.chat(t, "", false)
	none.chat(t, "00-"+clientTraceID+"-"+clientSpanID+"-00", false)
	waitFor(t, func() bool { return len(none.engineTraceparents()) == 2 })
	waitInflightZero(t, none.srv)
	if n := len(none.spans.Ended()); n != 0 {
		t.Fatalf("ratio 0 and an unsampled parent recorded %d spans", n)
	}
	for _, tp := range none.engineTraceparents() {
		if !strings.HasSuffix(tp, "-00") {
			t.Fatalf("an unsampled request sent the engine %s", tp)
		}
	}
}

// Without a tracer, the client's traceparent reaches the engine as it
// came: kvgate is then a hop that forwards the trace, not part of it.
func TestTraceForwardedWhenNotTracing(t *testing.T) {
	tg := startTraced(t, 1, false)
	tg.chat(t, clientTraceparent, false)
	tg.chat(t, "", false)
	waitFor(t, func() bool { return len(tg.engineTraceparents()) >= 1 })
	waitInflightZero(t, tg.srv)
	if got := tg.engineTraceparents(); len(got) != 1 || got[0] != clientTraceparent {
		t.Fatalf("engines were sent %v, want the client's %s once", got, clientTraceparent)
	}
}

// A request for a path kvgate does not serve is named by its method (span
// names stay few), answered 404 without an error status: a server span's
// 4xx is the client's error.
func TestTraceUnknownPath(t *testing.T) {
	tg := startTraced(t, 1, true)
	resp, _ := post(t, tg.base+"/v1/no-such-api", "", "{}")
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	root := tg.ended(t)["POST"]
	if root == nil || attrs(root)[attrStatusCode].AsInt64() != 404 || root.Status().Code != codes.Unset {
		t.Fatalf("request span %+v", root)
	}
}
