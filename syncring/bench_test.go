package syncring

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// churn is a LoadSource whose loads move every round: each read changes a
// fraction of the engines' values, as routing does between rounds.
type churn struct {
	mu    sync.Mutex
	loads []Load
	frac  float64
	rng   *rand.Rand
}

func (c *churn) ReadLoad(dst []Load, mark func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.loads {
		if c.rng.Float64() < c.frac {
			c.loads[i].PrefillTokens = max(0, c.loads[i].PrefillTokens+c.rng.Int64N(8192)-4096)
			c.loads[i].DecodeTokens = max(0, c.loads[i].DecodeTokens+c.rng.Int64N(2048)-1024)
			c.loads[i].Requests = max(0, c.loads[i].Requests+c.rng.Int64N(5)-2)
		}
	}
	copy(dst, c.loads)
	mark()
}

// BenchmarkRingRound measures what one replica sends per round for rings of
// N replicas over E engines, against the ring bound 2(N-1)/N of the raw
// vector and against all-to-all broadcast of the same vectors. Rounds run
// on their own clock; the benchmark samples the rounds completed over b.N
// x 20 ms.
// B/round counts ring bytes before any frame compression (off by default;
// BenchmarkChunkCompression says why).
func BenchmarkRingRound(b *testing.B) {
	const engines = 256
	for _, frac := range []float64{0.1, 1} {
		for _, n := range []int{2, 4, 8, 16} {
			if testing.Short() && n > 4 {
				continue
			}
			b.Run(fmt.Sprintf("churn=%g/N=%d", frac, n), func(b *testing.B) { benchRing(b, n, engines, frac) })
		}
	}
}

func benchRing(b *testing.B, n, engines int, frac float64) {
	keys := make([]string, engines)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.%d.%d:9000", i/256, i%256)
	}
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	rings := make([]*Ring, n)
	for i := range n {
		src := &churn{loads: make([]Load, engines), frac: frac, rng: rand.New(rand.NewPCG(uint64(i), 1))}
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Engines, cfg.Source, cfg.Listener = fmt.Sprintf("r%02d", i), addrs, keys, src, lns[i]
		r, err := Start(cfg)
		if err != nil {
			b.Fatal(err)
		}
		rings[i] = r
		defer r.Close()
	}
	checkFor(b, 30*time.Second, 10*time.Millisecond, func() error {
		if st := rings[n-1].Stats(); len(st.Members) != n || st.RoundsDone < 10 {
			return fmt.Errorf("ring did not form: %d of %d members, %d rounds done", len(st.Members), n, st.RoundsDone)
		}
		return nil
	})
	st0 := rings[1].Stats()
	b.ResetTimer()
	// Not synchronisation: this is the measurement window. Rounds run on
	// the ring's own clock; the benchmark counts those done in b.N x 20 ms.
	time.Sleep(time.Duration(b.N) * 20 * time.Millisecond)
	b.StopTimer()
	// Stats are a snapshot the loop publishes: wait for one taken after
	// the window.
	old := rings[1].stats.Load()
	checkFor(b, 10*time.Second, time.Millisecond, func() error {
		if rings[1].stats.Load() == old {
			rings[1].publishStatsSoon()
			return errors.New("the ring's stats were not refreshed after the window")
		}
		return nil
	})
	st := rings[1].Stats()
	rounds := float64(st.RoundsDone - st0.RoundsDone)
	if rounds == 0 {
		b.Fatal("no round completed")
	}
	raw := float64(8 * (loadValues*engines + n))
	b.ReportMetric(float64(st.RoundBytesTotal-st0.RoundBytesTotal)/rounds, "B/round")
	b.ReportMetric(raw*2*float64(n-1)/float64(n), "bound-B/round")
	b.ReportMetric(float64((n-1)*8*loadValues*engines), "all2all-B/round")
	b.ReportMetric(float64(st.RoundMicros), "round-us")
	b.ReportMetric(rounds/(float64(b.N)*0.02), "rounds/s")
}

// BenchmarkChunkCompression: what s2 and zstd make of delta-encoded chunks
// (256 engines, a 4-replica ring's chunk, every value moved or 10% moved),
// and what they cost, to decide whether ring frames are compressed.
func BenchmarkChunkCompression(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, frac := range []float64{0.1, 1} {
		prev := make([]int64, loadValues*256/4)
		cur := make([]int64, len(prev))
		for i := range cur {
			prev[i] = rng.Int64N(1 << 20)
			cur[i] = prev[i]
			if rng.Float64() < frac {
				cur[i] += rng.Int64N(8192) - 4096
			}
		}
		body := appendChunk(nil, 1, &chunk{Round: 9, Values: cur}, prev)
		for _, codec := range []wire.Codec{wire.CodecS2, wire.CodecZstd} {
			b.Run(fmt.Sprintf("churn=%g/codec=%d", frac, codec), func(b *testing.B) {
				var scratch, out []byte
				var err error
				for b.Loop() {
					out, err = wire.AppendFrameCompressed(out[:0], 0, &wire.Ring{Body: body}, codec, &scratch)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(body)+wire.HeaderSize), "plain-B")
				b.ReportMetric(float64(len(out)), "compressed-B")
			})
		}
	}
}
