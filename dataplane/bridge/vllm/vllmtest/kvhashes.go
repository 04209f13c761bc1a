package vllmtest

import (
	"fmt"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TierSet is a set of kvgate block hashes per wire tier as a router's
// index summarises it: how many, and the wrapping sum of the hashes.
type TierSet struct {
	Blocks, Sums [kvstore.NumTiers]uint64
}

// KVHashes returns kvgate's view of what the fake holds: h's hashes of
// its GPU blocks and CPU copies (an adapter's blocks under its wire id in
// loras), as a router's index should hold them.
func (f *Fake) KVHashes(h *kvstore.Hasher, loras map[string]uint32) (TierSet, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out TierSet
	for _, t := range []struct {
		tier   wire.Tier
		blocks map[vllm.Hash]*entry
	}{{wire.TierGPU, f.cache}, {wire.TierCPU, f.offload.blocks}} {
		for _, e := range t.blocks {
			var keys *kvstore.Keys
			if e.lora != "" {
				id, ok := loras[e.lora]
				if !ok {
					return out, fmt.Errorf("vllmtest: no wire id for adapter %q", e.lora)
				}
				keys = &kvstore.Keys{LoRAID: id}
			}
			hs, err := h.Hash(nil, e.prefix, keys)
			if err != nil || len(hs) == 0 {
				return out, fmt.Errorf("vllmtest: hashing a block of %d tokens: %v", len(e.prefix), err)
			}
			out.Blocks[t.tier]++
			out.Sums[t.tier] += hs[len(hs)-1]
		}
	}
	return out, nil
}
