package route

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// BenchmarkRouteShort times one kv routing decision for a short prompt
// (the 12 tokens of proxybench's completion, and 1,024) over 4, 16 and 64
// engines that have each sent KV events: what a decision costs where the
// prompt's hashing and matching are cheap and the per-engine work shows.
// Split is set, as the gateway sets it for one client stream. cpu-ns/op
// is the process's CPU time (user and system) over b.N: on a shared
// machine it moves less than ns/op.
func BenchmarkRouteShort(b *testing.B) {
	for _, engines := range []int{4, 16, 64} {
		pool := simPool(b, engines)
		rng := rand.New(rand.NewPCG(5, 6))
		chain := make([]uint64, 64)
		for _, e := range pool.Engines() {
			for j := range chain {
				chain[j] = rng.Uint64()
			}
			slot, _ := e.Slot()
			if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Hashes: chain}}); err != nil {
				b.Fatal(err)
			}
		}
		r := New(pool, PolicyKV, DefaultWeights())
		for _, n := range []int{12, 1024} {
			req := &Request{Model: "kvgate/sim", Tokens: randomPrompt(rng, n), Split: true, MaxTokens: 16}
			b.Run(fmt.Sprintf("engines=%d/tokens=%d", engines, n), func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					d, err := r.Route(req)
					if err != nil {
						b.Fatal(err)
					}
					d.Done()
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
