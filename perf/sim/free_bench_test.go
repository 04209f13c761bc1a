package sim

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// BenchmarkFreeRequest: a router's 8 GENERATEs of 1 and of 16 tokens a
// round, in one write on one connection to a zero-cost engine in this
// process; wall ns, CPU ns (getrusage) and allocations per request, both
// sides.
func BenchmarkFreeRequest(b *testing.B) {
	for _, tokens := range []uint32{1, 16} {
		b.Run(fmt.Sprintf("tokens=%d", tokens), func(b *testing.B) {
			_, addr := startServer(b, func(c *Config) { c.Rank.GPUBlocks = 8192 })
			c := dialRouterFeatures(b, addr, true)
			g := generate([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, tokens)
			var m wire.TokensMsg
			b.ReportAllocs()
			stream := uint32(1)
			freeRound(b, c, g, &m, stream, 8) // warm
			cpu0 := cpuTime(b)
			for b.Loop() {
				freeRound(b, c, g, &m, stream, 8)
				stream += 16
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(8*b.N), "ns/request")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(8*b.N), "cpu-ns/request")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dialRouterFeatures connects a router that takes batched TOKENS frames
// (wire.FeatureTokenBatch) or does not.
func dialRouterFeatures(tb testing.TB, addr string, batch bool) *wire.Conn {
	tb.Helper()
	var f wire.Feature
	if batch {
		f = wire.FeatureTokenBatch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r", Features: f}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(60 * time.Second))
	return c
}

// freeRound sends n GENERATEs of prompt, maxTokens each, in one write on
// streams from first, and reads frames until all n ended, returning the
// tokens they carried and the TOKENS frames. It allocates nothing itself
// once g and m have been used.
func freeRound(tb testing.TB, c *wire.Conn, g *wire.Generate, m *wire.TokensMsg, first uint32, n int) (tokens, frames int) {
	for i := range n {
		if err := c.Queue(first+uint32(2*i), g); err != nil {
			tb.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		tb.Fatal(err)
	}
	for ended := 0; ended < n; {
		f, err := c.ReadFrame()
		if err != nil {
			tb.Fatal(err)
		}
		if f.Type != wire.TypeTokens {
			continue
		}
		if err := wire.DecodeFrame(f, m, nil); err != nil {
			tb.Fatal(err)
		}
		tokens, frames = tokens+m.Tokens.Len(), frames+1
		if m.Last() {
			ended++
		}
	}
	return tokens, frames
}
