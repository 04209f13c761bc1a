//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestDPRanksFindTheirCache is issue 22's case through the processes:
// kvgate in front of one kvgate-sim with 4 data-parallel ranks (separate
// schedulers and caches), 16 long prompts sent at once, then each again at
// once. Routed as one engine (rank 0's cache matched, "any rank" sent), 5
// of 16 found their cache; routed by (engine, rank), with the chosen rank
// in the GENERATE, all 16 do, and the per-rank metrics show the ranks'
// caches apart.
func TestDPRanksFindTheirCache(t *testing.T) {
	const ranks, prompts, promptLen = 4, 16, 4096
	sim := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", "dp4", "--model", model, "--profile", "default",
		"--speed", "20", "--dp-ranks", fmt.Sprint(ranks), "--load-interval", "5ms")
	addr := sim.waitLog(t, "serving")["addr"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	admin := adminOf(t, base)
	ps := make([][]uint32, prompts)
	for i := range ps {
		ps[i] = make([]uint32, promptLen)
		for j := range ps[i] {
			ps[i][j] = uint32((i*promptLen+j)*7919%150000 + 1)
		}
	}
	burst := func() []usage {
		out := make([]usage, prompts)
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() {
				resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": p, "max_tokens": 2, "ignore_eos": true})
				var r struct {
					Usage usage `json:"usage"`
				}
				if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 {
					t.Errorf("prompt %d: %d %s", i, resp.StatusCode, body)
				}
				out[i] = r.Usage
			})
		}
		wg.Wait()
		return out
	}
	burst()
	// The second burst starts once every prompt's blocks are in the index,
	// each rank's in its own slot.
	blocks := func() (total float64, perRank []float64) {
		for r := range ranks {
			v := metricFloat(t, admin, fmt.Sprintf(`kvgate_rank_cached_blocks{engine=%q,rank="%d",tier="gpu"} `, addr, r))
			perRank = append(perRank, v)
			total += v
		}
		return total, perRank
	}
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if total, per := blocks(); total < prompts*promptLen/16 {
			return fmt.Errorf("the index holds %v blocks per rank, want %d in all", per, prompts*promptLen/16)
		}
		return nil
	})
	_, per := blocks()
	for r, v := range per {
		if v == 0 {
			t.Fatalf("the burst left rank %d without blocks: %v", r, per)
		}
	}
	found := 0
	for i, u := range burst() {
		if u.Details.Cached >= promptLen-16 {
			found++
		} else {
			t.Logf("prompt %d: %d of %d tokens cached", i, u.Details.Cached, u.PromptTokens)
		}
	}
	if found != prompts {
		t.Fatalf("%d of %d prompts found their cache", found, prompts)
	}
}
