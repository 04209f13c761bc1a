//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestBridgeToFakeSGLangDP: kvgate -> kvgate-bridge --engine-kind sglang
// --dp-ranks 2 -> a fake SGLang with two DP-attention ranks
// (vllmtest.SGLangDP: one HTTP API, rank r publishing on the events and
// replay ports + r). kvgate picks the rank of each request and its
// GENERATE names it, which the bridge passes as data_parallel_rank: every
// request reaches the rank it names. kvgate's
// index holds each rank's pages in that rank's slot, hash for hash,
// through warm-up, requests on both ranks, and eviction on one rank.
func TestBridgeToFakeSGLangDP(t *testing.T) {
	dp, err := vllmtest.StartSGLangDP(model, sglPage, sglPages, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	br := start(t, "kvgate-bridge", "--engine-kind", "sglang", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--engine-url", dp.URL, "--kv-events", dp.EventsURL, "--replay", dp.ReplayURL, "--model", model, "--dp-ranks", "2",
		"--block-size", fmt.Sprint(sglPage), "--id", "sglang-dp", "--metrics-interval", "100ms")
	if checked := br.waitLog(t, "SGLang server checked"); checked["dp_size"] != 2.0 {
		t.Fatalf("checked %v", checked)
	}
	line := br.waitLog(t, "bridge serving")
	addr := line["addr"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	admin := adminOf(t, base)

	n := 0
	text := func() string {
		n++
		return fmt.Sprintf("Rank question %d. %s", n, strings.Repeat("Two attention ranks share one SGLang server. ", 10))
	}
	prompt := func() []uint32 { // a prompt of the test's own, served on one rank without kvgate
		n++
		p := make([]uint32, 3*sglPage)
		for i := range p {
			p[i] = uint32(n*1000 + i + 1)
		}
		return p
	}
	// Until a page of each rank reached the index (PUB drops what precedes
	// a subscription): requests through kvgate, and one more prompt on a
	// rank still missing.
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		slots := indexSlots(t, admin)[addr]
		var missing []int
		for r, f := range dp.Ranks {
			if slots[r].Blocks[0] == 0 {
				missing = append(missing, r)
				f.Serve(prompt())
			}
		}
		if len(missing) == 0 {
			return nil
		}
		complete(t, base, text(), 1)
		return fmt.Errorf("no page of ranks %v reached kvgate's index", missing)
	})
	// kvgate picks the rank (by its cost; idle ranks are near-ties, one
	// taken at random) and names it: requests until each rank has served
	// some, and every one went to the rank it named.
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		for r, f := range dp.Ranks {
			if len(f.Requests()) == 0 {
				complete(t, base, text(), 1)
				return fmt.Errorf("rank %d has served none of kvgate's requests", r)
			}
		}
		return nil
	})
	for range 6 {
		complete(t, base, text(), 1)
	}
	for r, f := range dp.Ranks {
		for _, req := range f.Requests() {
			if rank, ok := req.Body["data_parallel_rank"]; !ok || rank != float64(r) {
				t.Fatalf("rank %d got a request for rank %v (named: %v)", r, rank, ok)
			}
		}
	}
	waitRanks := func(nudge bool) {
		t.Helper()
		checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			slots := indexSlots(t, admin)[addr]
			for r, f := range dp.Ranks {
				if err := sameSet(slots[r], engineSet(t, f, nil)); err != nil {
					if nudge {
						f.Serve(prompt())
					}
					return fmt.Errorf("rank %d: %v", r, err)
				}
			}
			return nil
		})
	}
	waitRanks(true)

	// Rank 1 past its pool: its evictions leave rank 1's slot only.
	for range 20 {
		dp.Ranks[1].Serve(prompt())
	}
	if dp.Ranks[1].Blocks() != sglPages {
		t.Fatalf("rank 1 holds %d pages, want a full pool of %d", dp.Ranks[1].Blocks(), sglPages)
	}
	waitRanks(false)
}
