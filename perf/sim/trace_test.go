package sim

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// The simulator announces wire.FeatureTrace, serves a GENERATE with the
// trace section as any other, and logs the traceparent with the request.
func TestTracedGenerate(t *testing.T) {
	logs := &strings.Builder{}
	logged := make(chan struct{}, 1)
	_, addr := startServer(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(notifyWriter{logs, logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	c := dialRouter(t, addr, "")
	if c.Peer.Features&wire.FeatureTrace == 0 {
		t.Fatalf("WELCOME features %#x lack FeatureTrace", c.Peer.Features)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	g := generate([]uint32{1, 2, 3, 4}, 3)
	tr, _ := wire.ParseTraceparent(tp)
	g.Flags, g.Trace = g.Flags|wire.GenTrace, tr
	if err := c.Send(1, g); err != nil {
		t.Fatal(err)
	}
	msgs, e := readStream(t, c, 1, map[wire.Type]int{})
	if e != nil || len(msgs) == 0 {
		t.Fatalf("traced GENERATE: %v, %d frames", e, len(msgs))
	}
	<-logged
	if !strings.Contains(logs.String(), "traceparent="+tp) {
		t.Fatalf("the request's traceparent is not in the log:\n%s", logs.String())
	}
}

// notifyWriter is the log of one test server: it signals each write on
// its channel (the server logs from its own goroutines).
type notifyWriter struct {
	b  *strings.Builder
	ch chan struct{}
}

func (w notifyWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "traced request") {
		w.b.Write(p)
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}
