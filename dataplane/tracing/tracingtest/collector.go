// Package tracingtest runs an OTLP/HTTP trace collector on loopback for
// tests: what an exporter posts to its /v1/traces is decoded (protobuf,
// gzip or not) and kept as Spans, so a test can check the spans a process
// really exported, over the wire, as a collector would see them.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is an exported span as the collector decoded it: ids in lowercase
// hex (ParentSpanID empty for a root), attributes as strings.
type Span struct {
	Service                       string // the resource's service.name
	Name                          string
	TraceID, SpanID, ParentSpanID string
	Kind                          int32 // OTLP's SpanKind: 2 server, 3 client
	Attributes                    map[string]string
	StartUnixNano, EndUnixNano    uint64
}

// Collector is a running OTLP/HTTP trace receiver.
type Collector struct {
	// URL is the collector's base URL (http://127.0.0.1:PORT): an
	// exporter's OTEL_EXPORTER_OTLP_ENDPOINT or kvgate's --otlp-endpoint.
	URL string

	mu    sync.Mutex
	spans []Span
	errs  []error
}

// NewCollector starts a collector that stops when the test ends.
func NewCollector(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Err returns the first export the collector could not decode.
func (c *Collector) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs[0]
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	spans, err := decode(r)
	c.mu.Lock()
	c.spans = append(c.spans, spans...)
	if err != nil {
		c.errs = append(c.errs, err)
	}
	c.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func decode(r *http.Request) ([]Span, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		return nil, fmt.Errorf("tracingtest: %s %s: want POST /v1/traces", r.Method, r.URL.Path)
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, fmt.Errorf("tracingtest: gzip: %w", err)
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("tracingtest: reading the export: %w", err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("tracingtest: decoding the export: %w", err)
	}
	var out []Span
	for _, rs := range req.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), ParentSpanID: hex.EncodeToString(s.ParentSpanId),
					Kind: int32(s.Kind), Attributes: attrs(s.Attributes), StartUnixNano: s.StartTimeUnixNano,
					EndUnixNano: s.EndTimeUnixNano})
			}
		}
	}
	return out, nil
}

// attrs renders OTLP attributes as strings (ints in decimal, bools as
// true/false).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(v.DoubleValue)
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}
