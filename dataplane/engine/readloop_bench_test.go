package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// loopFrames is a read loop's connection that reads the same round of
// frames again and again (plain TOKENS frames of one token, one per stream
// and decode step: what a zero-cost engine sends), until limit frames have
// been read. Before each round it hands the batch to the sinks, as
// batchConn does when the socket has nothing buffered.
type loopFrames struct {
	r     *wire.Reader
	round []byte // one round's frames
	off   int
	b     *sinkBatch
	read  int // frames returned
	limit int
}

func (l *loopFrames) Read(p []byte) (int, error) {
	if l.off == 0 {
		l.b.flush()
	}
	n := copy(p, l.round[l.off:])
	l.off = (l.off + n) % len(l.round)
	return n, nil
}

func (l *loopFrames) ReadFrame() (wire.Frame, error) {
	if l.read == l.limit {
		return wire.Frame{}, io.EOF
	}
	l.read++
	return l.r.ReadFrame()
}

func (l *loopFrames) Send(uint32, wire.Message) error { return nil }

// benchEngine is an engine with n open streams whose sinks count the ids
// they take, and a round of steps frames for each of them.
func benchEngine(tb testing.TB, n, steps int) (*Engine, []*countSink, []byte) {
	e := &Engine{pool: &Pool{cfg: DefaultConfig()}, log: slog.New(slog.DiscardHandler)}
	e.streams.Store(newStreamTable(streamTableMin))
	sinks := make([]*countSink, n)
	var round []byte
	m := &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{42})}
	for i := range sinks {
		e.mu.Lock()
		s := e.newStream()
		e.mu.Unlock()
		sinks[i] = &countSink{}
		s.Attach(sinks[i])
		p, err := m.AppendPayload(nil)
		if err != nil {
			tb.Fatal(err)
		}
		round = append(wire.AppendHeader(round, wire.TypeTokens, 0, s.id, len(p)), p...)
	}
	step := round
	for range steps - 1 {
		round = append(round, step...)
	}
	return e, sinks, round
}

// runFrames runs the read loop over frames rounds of e's streams.
func runFrames(tb testing.TB, e *Engine, round []byte, frames int) {
	b := &sinkBatch{}
	l := &loopFrames{round: round, b: b, limit: frames}
	l.r = wire.NewReader(l, &e.pool.cfg.Limits)
	var heard atomic.Uint64
	if err := e.readLoop(context.Background(), l, b, &heard); err != io.EOF {
		tb.Fatal(err)
	}
	b.flush()
}

// BenchmarkReadLoopTokens: the engine read loop's work per TOKENS frame
// (read, decode, the stream's lookup, queueing, and the batch's hand-off
// to the sinks), one token a frame, over 256 and 2,048 streams, with one
// or 8 frames per stream between the batch's hand-offs (a read loop that
// keeps up, one that lags).
func BenchmarkReadLoopTokens(b *testing.B) {
	for _, steps := range []int{1, 8} {
		for _, n := range []int{256, 2048} {
			b.Run(fmt.Sprintf("streams=%d/steps=%d", n, steps), func(b *testing.B) { benchReadLoop(b, n, steps) })
		}
	}
}

func benchReadLoop(b *testing.B, n, steps int) {
	e, sinks, round := benchEngine(b, n, steps)
	b.ReportAllocs()
	b.SetBytes(int64(len(round) / (n * steps)))
	b.ResetTimer()
	runFrames(b, e, round, b.N)
	b.StopTimer()
	got := 0
	for _, s := range sinks {
		got += s.n
	}
	if got != b.N {
		b.Fatalf("the sinks took %d ids of %d frames", got, b.N)
	}
}

// TestReadLoopTokensAllocs: the read loop allocates nothing per plain
// TOKENS frame for streams whose sinks take them (a run of twice the
// frames allocates what a run of the frames does: the run's reader and
// batch), and every id reaches its stream's sink.
func TestReadLoopTokensAllocs(t *testing.T) {
	const streams, rounds = 256, 8
	e, sinks, round := benchEngine(t, streams, 1)
	runFrames(t, e, round, streams) // the events' arrays are allocated once
	short := testing.AllocsPerRun(5, func() { runFrames(t, e, round, rounds*streams) })
	long := testing.AllocsPerRun(5, func() { runFrames(t, e, round, 2*rounds*streams) })
	if long != short {
		t.Fatalf("%v allocations for %d frames, %v for %d: the loop allocates per frame", short, rounds*streams, long, 2*rounds*streams)
	}
	want := 1 + 6*rounds + 6*2*rounds // AllocsPerRun runs once more to warm up
	for i, s := range sinks {
		if s.n != want {
			t.Fatalf("stream %d's sink took %d ids, want %d", i, s.n, want)
		}
	}
}
