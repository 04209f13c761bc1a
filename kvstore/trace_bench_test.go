package kvstore

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// traceRequest is one Mooncake request as the index sees it: the chained
// hashes of its full 16-token blocks.
type traceRequest struct{ hashes []uint64 }

// loadTrace reads the Mooncake trace in testdata and derives, for each
// request, the chained hashes of its 16-token blocks: each 512-token block
// id stands for 32 blocks, so requests with equal leading ids share those
// hashes, as prompts with a common prefix do.
func loadTrace(tb testing.TB, limit int) []traceRequest {
	tb.Helper()
	f, err := os.Open("testdata/mooncake_synthetic_trace.jsonl.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var out []traceRequest
	for sc.Scan() && len(out) < limit {
		var r struct {
			InputLength int     `json:"input_length"`
			HashIDs     []int64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		hs := make([]uint64, 0, r.InputLength/16)
		parent := uint64(0x6b76676174657472)
		for _, id := range r.HashIDs {
			for sub := range 32 {
				if len(hs) == r.InputLength/16 {
					break
				}
				parent = mix64(parent ^ mix64(uint64(id)<<5|uint64(sub)))
				hs = append(hs, parent)
			}
		}
		out = append(out, traceRequest{hs})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// BenchmarkMatchTrace replays the Mooncake trace against 64 engines on an
// index of about 10 M entries (random background chains plus what the
// replay stores): each request is matched against every engine, sent to
// the one holding most of it (round-robin when none holds any), and that
// engine then stores the rest of the prompt. It reports each match's time
// as percentiles, and the time per 512 blocks walked (a match looks at
// blocks up to one past the deepest engine's run) for comparison with
// BenchmarkMatch. Trace prompts average about 960 blocks of 16 tokens.
// Between replays the stored blocks are removed again, untimed.
func BenchmarkMatchTrace(b *testing.B) {
	entries, limit := 10_000_000, 4000
	if testing.Short() {
		entries, limit = 1_000_000, 200
	}
	reqs := loadTrace(b, limit)
	ix, slots := buildIndex(b, 64, entries-2_000_000*len(reqs)/4000)
	out := make([]Match, len(slots))
	var lat []time.Duration
	var blocks, walked, matched, peak int
	for b.Loop() {
		lat, blocks, walked, matched = lat[:0], 0, 0, 0
		stored := make([][]uint64, len(slots))
		for i, r := range reqs {
			start := time.Now()
			ix.Match(r.hashes, slots, out)
			lat = append(lat, time.Since(start))
			blocks += len(r.hashes)
			best, depth := i%len(slots), 0
			for k, m := range out {
				if d := m.Depth(); d > depth {
					best, depth = k, d
				}
			}
			matched += depth
			walked += min(depth+1, len(r.hashes)) // Match looks one block past the deepest run
			if rest := r.hashes[depth:]; len(rest) > 0 {
				must(b, ix.Apply(slots[best], []Event{{Kind: Stored, Hashes: rest}}))
				stored[best] = append(stored[best], rest...)
			}
		}
		b.StopTimer()
		peak = int(ix.Stats().Entries)
		for k, hs := range stored {
			must(b, ix.Apply(slots[k], []Event{{Kind: Removed, Hashes: hs}}))
		}
		b.StartTimer()
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(pct(0.5), "p50-us")
	b.ReportMetric(pct(0.99), "p99-us")
	b.ReportMetric(float64(sum.Nanoseconds())/1e3/float64(walked)*512, "us/512-walked")
	b.ReportMetric(float64(matched)/float64(blocks), "hit-rate")
	b.ReportMetric(float64(peak), "entries")
	if testing.Verbose() {
		fmt.Printf("match trace: %d requests, %d blocks, mean %.1f us\n", len(lat), blocks, float64(sum.Nanoseconds())/1e3/float64(len(lat)))
	}
}
