package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/kvgate/kvgate/dataplane/tracing/tracingtest"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint string
		env      map[string]string
		want     bool
	}{
		{"off by default", "", nil, false},
		{"flag", "http://c:4318", nil, true},
		{"standard env", "", map[string]string{envEndpoint: "http://c:4318"}, true},
		{"traces env", "", map[string]string{envTracesEndpoint: "http://c:4318/v1/traces"}, true},
		{"SDK disabled", "http://c:4318", map[string]string{envSDKDisabled: "true"}, false},
		{"SDK not disabled", "http://c:4318", map[string]string{envSDKDisabled: "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Endpoint, c.Getenv = tc.endpoint, env(tc.env)
			if got := c.Enabled(); got != tc.want {
				t.Fatalf("Enabled() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint string
		ratio          float64
		ok             bool
	}{
		{"defaults", "", 1, true},
		{"ratio half", "http://c:4318", 0.5, true},
		{"ratio over one", "", 1.5, false},
		{"ratio negative", "", -0.1, false},
		{"no scheme", "c:4318", 1, false},
		{"grpc scheme", "grpc://c:4317", 1, false},
		{"no host", "http://", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Endpoint, c.SampleRatio = tc.endpoint, tc.ratio
			err := c.Validate()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate() = %v, want ok %v", err, tc.ok)
			}
		})
	}
	for in, want := range map[string]string{
		"http://c:4318":           "http://c:4318/v1/traces",
		"http://c:4318/":          "http://c:4318/v1/traces",
		"https://c/otlp/v1/spans": "https://c/otlp/v1/spans",
	} {
		if got, err := tracesURL(in); err != nil || got != want {
			t.Errorf("tracesURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// Start's provider exports over OTLP/HTTP to the endpoint's /v1/traces:
// the collector decodes the span, its parent and the service name.
func TestStartExports(t *testing.T) {
	col := tracingtest.NewCollector(t)
	c := Defaults()
	c.Endpoint = col.URL
	p, err := Start(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Tracer()
	ctx, parent := tr.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
	_, child := tr.Start(ctx, "child")
	child.End()
	parent.End()
	if err := p.Shutdown(30 * time.Second); err != nil { // flushes the batch
		t.Fatal(err)
	}
	if err := col.Err(); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	if len(spans) != 2 {
		t.Fatalf("collector got %d spans: %+v", len(spans), spans)
	}
	byName := map[string]tracingtest.Span{spans[0].Name: spans[0], spans[1].Name: spans[1]}
	ps, cs := byName["parent"], byName["child"]
	if ps.Service != "kvgate" || ps.Kind != 2 || ps.ParentSpanID != "" || ps.TraceID != parent.SpanContext().TraceID().String() {
		t.Fatalf("parent span %+v", ps)
	}
	if cs.ParentSpanID != ps.SpanID || cs.TraceID != ps.TraceID {
		t.Fatalf("child span %+v is not the parent's child", cs)
	}
}

// The sampler follows a sampled caller whatever the ratio and samples
// root spans at the ratio.
func TestSampler(t *testing.T) {
	c := Defaults()
	c.SampleRatio = 0
	p := NewProvider(c, nil)
	t.Cleanup(func() { _ = p.Shutdown(time.Second) })
	if _, s := p.Tracer().Start(context.Background(), "root"); s.SpanContext().IsSampled() {
		t.Fatal("ratio 0 sampled a root span")
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	remote := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	if _, s := p.Tracer().Start(remote, "child"); !s.SpanContext().IsSampled() || s.SpanContext().TraceID() != tid {
		t.Fatal("a sampled caller's span was not followed")
	}
}

// The SDK's errors are slog warnings.
func TestRouteLogs(t *testing.T) {
	var buf bytes.Buffer
	RouteLogs(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { RouteLogs(slog.New(slog.DiscardHandler)) })
	otel.Handle(errors.New("export failed: connection refused"))
	if s := buf.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "export failed: connection refused") {
		t.Fatalf("log %q", s)
	}
}
