//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/kvstore"
)

// indexSlots is kvgate's index per engine (its address) and rank: blocks
// and the wrapping sum of their hashes per tier, from /debug/state.
func indexSlots(t *testing.T, admin string) map[string]map[int]vllmtest.TierSet {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Index struct {
			Engines []struct {
				Engine           string
				Rank             int
				Blocks, HashSums [kvstore.NumTiers]uint64
			} `json:"engines"`
		} `json:"index"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]vllmtest.TierSet{}
	for _, e := range st.Index.Engines {
		if out[e.Engine] == nil {
			out[e.Engine] = map[int]vllmtest.TierSet{}
		}
		out[e.Engine][e.Rank] = vllmtest.TierSet{Blocks: e.Blocks, Sums: e.HashSums}
	}
	return out
}

// indexSets is kvgate's index per engine, its ranks summed.
func indexSets(t *testing.T, admin string) map[string]vllmtest.TierSet {
	t.Helper()
	out := map[string]vllmtest.TierSet{}
	for engine, ranks := range indexSlots(t, admin) {
		var v vllmtest.TierSet
		for _, s := range ranks {
			for i := range kvstore.NumTiers {
				v.Blocks[i] += s.Blocks[i]
				v.Sums[i] += s.Sums[i]
			}
		}
		out[engine] = v
	}
	return out
}

// engineSet is what kvgate's index should hold of f: the bridge's hashes
// (kvgate's, of --block-size blocks of the model, seed 0) of its GPU and
// CPU blocks, an adapter's under its wire id in loras.
func engineSet(t *testing.T, f *vllmtest.Fake, loras map[string]uint32) vllmtest.TierSet {
	t.Helper()
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: f.BlockSize, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.KVHashes(h, loras)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameSet says how kvgate's index of one engine differs from the engine's
// blocks, nil when it holds the same blocks in the same tiers.
func sameSet(got, want vllmtest.TierSet) error {
	if got != want {
		return fmt.Errorf("kvgate's index holds %v blocks per tier (hash sums %x), the engine %v (%x)", got.Blocks, got.Sums, want.Blocks, want.Sums)
	}
	return nil
}

// waitSet waits until kvgate's index of the engine at addr holds f's
// blocks; nudge, when not nil, runs after each failed look (a batch
// published while a subscription was landing shows missing only when the
// next one comes).
func waitSet(t *testing.T, admin, addr string, f *vllmtest.Fake, loras map[string]uint32, nudge func()) {
	t.Helper()
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		err := sameSet(indexSets(t, admin)[addr], engineSet(t, f, loras))
		if err != nil && nudge != nil {
			nudge()
		}
		return err
	})
}
