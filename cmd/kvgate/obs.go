package main

import (
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvgate/kvgate/dataplane/gateway"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tracing"
)

// obsFlags configure what kvgate records of each request: the access log
// and OpenTelemetry traces (dataplane/gateway accesslog.go, trace.go;
// dataplane/tracing).
type obsFlags struct {
	accessSample float64
	tracing      tracing.Config
}

func (f *obsFlags) register(fs *flag.FlagSet) {
	f.tracing = tracing.Defaults()
	fs.Float64Var(&f.accessSample, "access-log-sample", 0, "fraction of requests, 0..1, written to the log as one \"access\" line each (id, model, engine, policy, tokens, TTFT, duration, status); with it above 0, requests answered 5xx are always written (0: no access log)")
	fs.StringVar(&f.tracing.Endpoint, "otlp-endpoint", "", "OpenTelemetry collector to export request traces to over OTLP/HTTP, http(s)://HOST:PORT (spans go to /v1/traces) or a full URL with its path (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or $OTEL_EXPORTER_OTLP_ENDPOINT; neither: no tracing)")
	fs.Float64Var(&f.tracing.SampleRatio, "otlp-sample-ratio", f.tracing.SampleRatio, "fraction, 0..1, of requests without a sampled client traceparent whose traces are exported; a client's traceparent decides for its request")
}

// check refuses values out of range (also for --check-config).
func (f *obsFlags) check() error {
	if !(f.accessSample >= 0 && f.accessSample <= 1) {
		return fmt.Errorf("--access-log-sample %v: want a fraction in [0, 1]", f.accessSample)
	}
	if err := f.tracing.Validate(); err != nil {
		return fmt.Errorf("--otlp-endpoint/--otlp-sample-ratio: %w", err)
	}
	return nil
}

// obsRun is the daemon's tracer provider, nil when it does not trace.
type obsRun struct {
	provider *tracing.Provider
	log      *slog.Logger
}

// start makes gw observe its requests as the flags say, and starts the
// OTLP exporter when tracing is on. The observer is always set: even
// without an access log or traces, a client's traceparent is forwarded to
// the engines.
func (f *obsFlags) start(gw *gateway.Gateway, policy route.Policy, log *slog.Logger) (*obsRun, error) {
	gw.Observe = &gateway.Observer{Log: log, Sample: f.accessSample, Policy: policy}
	if !f.tracing.Enabled() {
		return nil, nil
	}
	p, err := tracing.Start(f.tracing, log)
	if err != nil {
		return nil, err
	}
	gw.Observe.Tracer = p.Tracer()
	log.Info("tracing requests", "endpoint", f.tracing.Endpoint, "sample_ratio", f.tracing.SampleRatio)
	return &obsRun{provider: p, log: log}, nil
}

// close exports the spans still batched.
func (r *obsRun) close() {
	if r == nil {
		return
	}
	if err := r.provider.Shutdown(5 * time.Second); err != nil {
		r.log.Warn("tracing: spans not exported at shutdown", "err", err)
	}
}
