package vllmtest

import (
	"encoding/binary"
	"encoding/hex"
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
			keys, err := kvgateKeys(e, loras)
			if err != nil {
				return out, err
			}
			toks := e.prefix
			if len(e.mm) > 0 {
				toks = e.prompt // the images as the whole prompt places them
			}
			hs, err := h.Hash(nil, toks, keys)
			if n := len(e.prefix) / h.BlockSize(); err != nil || len(hs) < n || n == 0 {
				return out, fmt.Errorf("vllmtest: hashing a block of %d tokens: %v", len(e.prefix), err)
			}
			out.Blocks[t.tier]++
			out.Sums[t.tier] += hs[len(e.prefix)/h.BlockSize()-1]
		}
	}
	return out, nil
}

// kvgateKeys are the keys kvgate hashes a cached block's prompt with: its
// adapter's wire id in loras, its images' content ids (identifiers that
// are kvgate ids in hex: the contract's low 64 bits).
func kvgateKeys(e *entry, loras map[string]uint32) (*kvstore.Keys, error) {
	if e.lora == "" && len(e.mm) == 0 {
		return nil, nil
	}
	var keys kvstore.Keys
	if e.lora != "" {
		id, ok := loras[e.lora]
		if !ok {
			return nil, fmt.Errorf("vllmtest: no wire id for adapter %q", e.lora)
		}
		keys.LoRAID = id
	}
	for _, it := range e.mm {
		id, err := hex.DecodeString(it.Identifier)
		if err != nil || len(id) != 16 {
			return nil, fmt.Errorf("vllmtest: image %q is not a kvgate content id", it.Identifier)
		}
		keys.MM = append(keys.MM, kvstore.MMItem{Offset: uint32(it.Offset), Length: uint32(it.Length), Hash: binary.BigEndian.Uint64(id[8:])})
	}
	return &keys, nil
}
