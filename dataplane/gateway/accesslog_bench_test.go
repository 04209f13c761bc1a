package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/dataplane/tracing"
)

// BenchmarkObserve serves one-token completions through a test gateway
// (two zero-time simulated engines, keep-alive client) in each mode of
// observing them: none (no observer), off (an observer with nothing to
// do, the daemon's default), access (every request logged, to a JSON
// handler writing nowhere), trace (every request traced, to an in-memory
// recorder) and trace-unsampled (traced at ratio 0). Allocations are the
// whole process's per request: client, gateway and engines; off must add
// none to none.
func BenchmarkObserve(b *testing.B) {
	for _, mode := range []struct {
		name   string
		tracer bool
		ratio  float64
		sample float64
		nilObs bool
	}{
		{name: "none", nilObs: true},
		{name: "off"},
		{name: "access", sample: 1},
		{name: "trace", tracer: true, ratio: 1},
		{name: "trace-unsampled", tracer: true, ratio: 0},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var o *Observer
			if !mode.nilObs {
				o = &Observer{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Sample: mode.sample, Policy: route.PolicyKV}
			}
			if mode.tracer {
				cfg := tracing.Defaults()
				cfg.SampleRatio = mode.ratio
				p := tracing.NewProvider(cfg, nil, sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
				b.Cleanup(func() { _ = p.Shutdown(time.Second) })
				o.Tracer = p.Tracer()
			}
			gw := startGatewayWith(b, gwOptions{observe: o})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			b.Cleanup(client.CloseIdleConnections)
			body := `{"model":"` + model + `","prompt":"one two three four","max_tokens":1}`
			do := func() {
				resp, err := client.Post(gw.base+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			do() // warm: connection, tokenizer caches
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				do()
			}
		})
	}
}
