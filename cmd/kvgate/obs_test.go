package main

import (
	"io"
	"strings"
	"testing"
)

// The access log and tracing flags are read and range-checked; tracing
// is off without an endpoint.
func TestObsFlags(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	for _, tc := range []struct {
		name string
		args []string
		want string // part of the error; "" for none
	}{
		{"defaults", nil, ""},
		{"sample", []string{"--access-log-sample", "0.25", "--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-sample-ratio", "0.1"}, ""},
		{"sample over one", []string{"--access-log-sample", "1.5"}, "--access-log-sample"},
		{"negative ratio", []string{"--otlp-sample-ratio", "-1"}, "sample ratio"},
		{"endpoint without scheme", []string{"--otlp-endpoint", "127.0.0.1:4318"}, "OTLP endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseFlags(append([]string{"--sim-engines", "1"}, tc.args...), io.Discard)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			case tc.name == "defaults" && (c.obs.accessSample != 0 || c.obs.tracing.Enabled()):
				t.Fatalf("defaults: sample %v, tracing %v", c.obs.accessSample, c.obs.tracing.Enabled())
			case tc.name == "sample" && (c.obs.accessSample != 0.25 || c.obs.tracing.SampleRatio != 0.1 || !c.obs.tracing.Enabled()):
				t.Fatalf("parsed %+v", c.obs)
			}
		})
	}
}
