package kvstore

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// buildIndex registers engines and fills the index with about entries
// (block, engine) pairs: each engine holds its own random blocks, stored as
// chains of 64 the way engines report them.
func buildIndex(tb testing.TB, engines, entries int) (*Index, []Slot) {
	tb.Helper()
	ix := New(Options{})
	slots := make([]Slot, engines)
	for e := range engines {
		s, err := ix.AddEngine(EngineConfig{ID: fmt.Sprintf("e%d", e), Capacity: [NumTiers]uint64{uint64(entries / engines), 0, 0}})
		if err != nil {
			tb.Fatal(err)
		}
		slots[e] = s[0]
	}
	rng := rand.New(rand.NewPCG(1, uint64(entries)))
	chain := make([]uint64, 64)
	per := entries / engines
	for _, s := range slots {
		for done := 0; done < per; done += len(chain) {
			for i := range chain {
				chain[i] = rng.Uint64()
			}
			if err := ix.Apply(s, []Event{{Kind: Stored, Hashes: chain[:min(len(chain), per-done)]}}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return ix, slots
}

func prompt512(seed uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, 77))
	hs := make([]uint64, 512)
	for i := range hs {
		hs[i] = rng.Uint64()
	}
	return hs
}

func sizes(b *testing.B, full ...int) []int {
	if testing.Short() {
		return []int{1_000_000}
	}
	return full
}

// BenchmarkMatch: an 8,192-token prompt (512 blocks of 16) against 64
// engines on an index of millions of (block, engine) entries.
//   - one-holds: one engine holds the whole prompt (what KV-aware routing
//     produces: a prefix lives where its requests were sent);
//   - typical: 8 engines hold leading runs of 64..512 blocks of the prompt;
//   - all-hold: every engine holds the whole prompt (32,768 hits, worst case);
//   - miss: nobody holds block 0;
//   - floor: no match, only a load of each block's home entry (see
//     homeLoads).
//
// hot matches one prompt over and over, so its entries stay in the core's
// caches and the figure is the CPU's work; cold cycles through many
// prompts of the same shape (1024, 64 with -short), so each match finds its
// entries in the shared cache or in memory, as a router that sees
// different prompts does.
func BenchmarkMatch(b *testing.B) {
	for _, n := range sizes(b, 10_000_000) {
		prompts := 1024
		if testing.Short() {
			prompts = 64
		}
		const perPrompt = 512 + 2304 // one-holds + typical entries
		ix, slots := buildIndex(b, 64, n-prompts*perPrompt-64*512)
		oneHolds := make([][]uint64, prompts)
		typical := make([][]uint64, prompts)
		for i := range prompts {
			oneHolds[i] = prompt512(uint64(1_000_000 + i))
			must(b, ix.Apply(slots[i%64], []Event{{Kind: Stored, Hashes: oneHolds[i]}}))
			typical[i] = prompt512(uint64(2_000_000 + i))
			for e := range 8 {
				must(b, ix.Apply(slots[(i+e)%64], []Event{{Kind: Stored, Hashes: typical[i][:64*(e+1)]}}))
			}
		}
		all := prompt512(2)
		for _, s := range slots {
			must(b, ix.Apply(s, []Event{{Kind: Stored, Hashes: all}}))
		}
		out := make([]Match, len(slots))
		for _, c := range []struct {
			name    string
			prompts [][]uint64
			depth   int
		}{
			{"one-holds/hot", oneHolds[:1], 512},
			{"one-holds/cold", oneHolds, 512},
			{"typical/hot", typical[:1], 512},
			{"typical/cold", typical, 512},
			{"all-hold/hot", [][]uint64{all}, 512},
			{"miss/hot", [][]uint64{prompt512(3)}, 0},
		} {
			b.Run(fmt.Sprintf("entries=%dM/%s", n/1_000_000, c.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					ix.Match(c.prompts[i%len(c.prompts)], slots, out)
					i++
				}
				if best := maxDepth(out); best != c.depth {
					b.Fatalf("best depth %d, want %d", best, c.depth)
				}
			})
		}
		b.Run(fmt.Sprintf("entries=%dM/floor/cold", n/1_000_000), func(b *testing.B) {
			i := 0
			var sink uint64
			for b.Loop() {
				sink += homeLoads(ix, oneHolds[i%len(oneHolds)])
				i++
			}
			runtime.KeepAlive(sink)
		})
	}
}

// homeLoads reads the home entry of every block and nothing else: one
// random cache line per block, no matching. On cold prompts it is the
// memory's share of a match, the floor below which no layout that reads a
// line per block can go.
func homeLoads(ix *Index, hashes []uint64) uint64 {
	var sum uint64
	for _, h := range hashes {
		t := &ix.shards[h>>(64-shardBits)]
		sum += t.entries[t.home(h)].hash
	}
	return sum
}

func maxDepth(out []Match) int {
	best := 0
	for _, m := range out {
		best = max(best, m.Depth())
	}
	return best
}

// BenchmarkApply: steady-state event application on a populated index; each
// op is one batch storing a 64-block chain and removing an older one, so the
// index keeps its size. ns/op is per batch; blocks/s counts both kinds.
func BenchmarkApply(b *testing.B) {
	for _, n := range sizes(b, 10_000_000) {
		ix, slots := buildIndex(b, 64, n)
		rng := rand.New(rand.NewPCG(5, 5))
		const window = 1024
		ring := make([][]uint64, window)
		for i := range ring {
			ring[i] = make([]uint64, 64)
			for j := range ring[i] {
				ring[i][j] = rng.Uint64()
			}
			must(b, ix.Apply(slots[i%len(slots)], []Event{{Kind: Stored, Hashes: ring[i]}}))
		}
		b.Run(fmt.Sprintf("entries=%dM", n/1_000_000), func(b *testing.B) {
			i := 0
			start := time.Now()
			for b.Loop() {
				s := slots[i%len(slots)]
				old := ring[i%window]
				must(b, ix.Apply(s, []Event{{Kind: Removed, Hashes: old}}))
				for j := range old {
					old[j] = rng.Uint64()
				}
				must(b, ix.Apply(s, []Event{{Kind: Stored, Hashes: old}}))
				i++
			}
			b.ReportMetric(float64(i*128)/time.Since(start).Seconds(), "blocks/s")
		})
	}
}

// BenchmarkMemory reports heap bytes per (block, engine) entry and the GC
// pause with the whole index live. The pause must not grow with the index:
// the entries are pointer-free, so the collector does not scan them.
func BenchmarkMemory(b *testing.B) {
	for _, n := range sizes(b, 1_000_000, 10_000_000, 20_000_000) {
		b.Run(fmt.Sprintf("entries=%dM", n/1_000_000), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				ix, _ := buildIndex(b, 64, n)
				runtime.GC()
				runtime.ReadMemStats(&after)
				st := ix.Stats()
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Entries), "heap-B/entry")
				b.ReportMetric(float64(st.Bytes)/float64(st.Entries), "table-B/entry")
				pause, cycle := gcPause()
				b.ReportMetric(float64(pause.Microseconds()), "gc-pause-us")
				b.ReportMetric(float64(cycle.Microseconds()), "gc-cycle-us")
				runtime.KeepAlive(ix)
			}
		})
	}
}

// gcPause runs a few collections and returns the longest stop-the-world
// pause among them and the mean wall time of a whole cycle.
func gcPause() (pause, cycle time.Duration) {
	var st debug.GCStats
	debug.ReadGCStats(&st)
	before := st.NumGC
	start := time.Now()
	const runs = 5
	for range runs {
		runtime.GC()
	}
	cycle = time.Since(start) / runs
	debug.ReadGCStats(&st)
	for i := 0; i < int(st.NumGC-before) && i < len(st.Pause); i++ {
		pause = max(pause, st.Pause[i])
	}
	return pause, cycle
}
