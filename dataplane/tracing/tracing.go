package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Errors of the package.
var (
	// ErrConfig: a configuration value is out of range or malformed.
	ErrConfig = errors.New("tracing: bad configuration")
)

// The standard environment that turns an OTLP trace exporter on
// (https://opentelemetry.io/docs/specs/otel/protocol/exporter/), and the
// one that turns the SDK off.
const (
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Config configures tracing. Its zero value, with no OTLP environment,
// traces nothing.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL (http://host:4318):
	// spans go to its /v1/traces, or to the URL's own path when it has
	// one. Empty: the OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT environment,
	// and no tracing without it.
	Endpoint string
	// SampleRatio is the fraction of requests without a sampled parent
	// whose traces are recorded, in [0, 1]. A request whose caller sent a
	// traceparent follows the caller's sampled flag.
	SampleRatio float64
	// ServiceName names the process in its spans (service.name), unless
	// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
	ServiceName string
	// Getenv reads the environment; nil: os.Getenv (tests inject theirs).
	Getenv func(string) string
}

// Defaults are the values kvgate's flags start from: every root request
// sampled once tracing is on, as the SDK's own default sampler does.
func Defaults() Config { return Config{SampleRatio: 1, ServiceName: "kvgate"} }

func (c *Config) getenv(k string) string {
	if c.Getenv != nil {
		return c.Getenv(k)
	}
	return os.Getenv(k)
}

// Enabled reports whether c turns tracing on: an endpoint is configured
// (by Endpoint or the environment) and OTEL_SDK_DISABLED is not true.
func (c *Config) Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(c.getenv(envSDKDisabled)), "true") {
		return false
	}
	return c.Endpoint != "" || c.getenv(envEndpoint) != "" || c.getenv(envTracesEndpoint) != ""
}

// Validate refuses a sample ratio outside [0, 1] and an endpoint that is
// not an http(s) URL with a host.
func (c *Config) Validate() error {
	if !(c.SampleRatio >= 0 && c.SampleRatio <= 1) {
		return fmt.Errorf("%w: sample ratio %v outside [0, 1]", ErrConfig, c.SampleRatio)
	}
	if c.Endpoint == "" {
		return nil
	}
	if _, err := tracesURL(c.Endpoint); err != nil {
		return err
	}
	return nil
}

// tracesURL is the URL spans are posted to: the endpoint's own path, or
// /v1/traces when it has none (as OTEL_EXPORTER_OTLP_ENDPOINT is read).
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: OTLP endpoint %q: want http(s)://HOST:PORT[/path]", ErrConfig, endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Provider is a running tracer provider and its exporter.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start builds the tracer provider c describes and routes the SDK's own
// errors and log lines to log. Spans are batched and exported in the
// background; Shutdown flushes them. Call it only when c.Enabled().
func Start(c Config, log *slog.Logger) (*Provider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	RouteLogs(log)
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		u, _ := tracesURL(c.Endpoint) // validated
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(attribute.String("service.name", c.ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		log.Warn("tracing: resource attributes", "err", err) // a partial resource still names the service
	}
	return NewProvider(c, res, sdktrace.WithBatcher(exp)), nil
}

// NewProvider is a provider with c's sampler and service, whose spans go to
// the given processors or exporters (tests pass a tracetest recorder).
// res nil: the service name alone.
func NewProvider(c Config, res *resource.Resource, opts ...sdktrace.TracerProviderOption) *Provider {
	if res == nil {
		res = resource.NewSchemaless(attribute.String("service.name", c.ServiceName))
	}
	opts = append([]sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
		sdktrace.WithResource(res),
	}, opts...)
	return &Provider{tp: sdktrace.NewTracerProvider(opts...)}
}

// Tracer is the tracer of kvgate's request spans.
func (p *Provider) Tracer() trace.Tracer {
	return p.tp.Tracer("github.com/kvgate/kvgate/dataplane/gateway")
}

// Shutdown exports the spans still batched and stops the exporter, within
// timeout.
func (p *Provider) Shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.tp.Shutdown(ctx)
}

// RouteLogs sends OpenTelemetry's error handler and internal logger to
// log: an export that fails is a warning line, the SDK's debug lines are
// debug lines (its V(1) and above are below slog's Info).
func RouteLogs(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
}
