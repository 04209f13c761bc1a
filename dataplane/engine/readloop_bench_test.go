package engine

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// benchStreams is how many streams BenchmarkReadLoopTokens feeds at once;
// benchFrameTokens the tokens of each frame.
const (
	benchStreams     = 512
	benchFrameTokens = 8
)

// BenchmarkReadLoopTokens: one engine connection feeds TOKENS frames, one
// per stream in turn, to benchStreams streams, each followed by its own
// consumer (Ready, Take, Release, as the gateway does). It reports the
// process's CPU per frame (cpu-ns/frame: the read loop, the hand-off and
// the consumers; the engine side only copies prepared bytes to the
// socket) besides the wall time.
func BenchmarkReadLoopTokens(b *testing.B) {
	_, _, e, c := ttConnected(b)
	streams := make([]*Stream, benchStreams)
	for i := range streams {
		streams[i], _ = ttOpen(b, e, c)
	}
	ids := make([]uint32, benchFrameTokens)
	var batch []byte // one plain frame per stream
	for _, s := range streams {
		var err error
		if batch, err = wire.AppendFrame(batch, s.id, &wire.TokensMsg{Tokens: wire.TokensOf(ids)}); err != nil {
			b.Fatal(err)
		}
	}
	rounds := (b.N + benchStreams - 1) / benchStreams
	var wg sync.WaitGroup
	got := make([]int, benchStreams)
	for i, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				<-s.Ready()
				evs := s.Take()
				for _, ev := range evs {
					got[i] += len(ev.Tokens)
					if ev.Last {
						return
					}
				}
				s.Release(evs)
			}
		}()
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range rounds {
		if _, err := c.NetConn.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range streams {
		c.send(b, s.id, &wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishLength})
	}
	wg.Wait()
	b.StopTimer()
	frames := float64(rounds * benchStreams)
	b.ReportMetric(float64(processCPU(b)-cpu0)/frames, "cpu-ns/frame")
	for i, n := range got {
		if n != rounds*benchFrameTokens {
			b.Fatalf("stream %d took %d tokens, want %d", i, n, rounds*benchFrameTokens)
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
