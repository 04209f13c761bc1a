// Package tracing sets up OpenTelemetry request tracing for kvgate: the
// official Go SDK's tracer provider exporting spans over OTLP/HTTP, off by
// default. It turns on with an endpoint (Config.Endpoint, kvgate's
// --otlp-endpoint) or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT environment, samples root requests at
// Config.SampleRatio and follows a caller's sampling decision otherwise
// (parent-based), and sends the SDK's own errors and log lines through
// log/slog.
//
// The gateway (dataplane/gateway, trace.go) makes the spans of each
// request; this package only builds the provider they come from, so a
// process without tracing never starts an exporter.
package tracing
