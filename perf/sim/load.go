package sim

import (
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Load reports the rank's scheduler state.
func (c *Core) Load() wire.Load {
	var l wire.Load
	l.Running, l.Waiting = uint32(len(c.running)), uint32(len(c.waiting))
	for _, r := range c.running {
		if r.started && r.target-r.computed <= 1 {
			l.ActiveDecodeTokens += uint64(r.computed)
		} else {
			l.QueuedPrefillTokens += uint64(r.target - r.computed)
		}
	}
	for _, r := range c.waiting {
		l.QueuedPrefillTokens += uint64(r.target - c.cachedPrefix(r))
	}
	used := c.blocks.capacity() - c.blocks.freeBlocks()
	l.Tiers = append(l.Tiers, wire.TierUsage{Tier: wire.TierGPU, Used: uint64(used), Total: uint64(c.blocks.capacity())})
	for _, p := range []*tierPool{&c.blocks.cpu, &c.blocks.disk} {
		if p.cap > 0 {
			l.Tiers = append(l.Tiers, wire.TierUsage{Tier: wire.Tier(p.tier), Used: uint64(len(p.entries)), Total: uint64(p.cap)})
		}
	}
	return l
}

// cachedPrefix counts the tokens of r's leading blocks held in any tier:
// those it will load, not prefill.
func (c *Core) cachedPrefix(r *Request) int {
	n := 0
	for _, h := range r.hashes[:min(len(r.hashes), (len(r.tokens)-1)/c.cfg.BlockSize)] {
		if !c.blocks.holds(h) {
			break
		}
		n++
	}
	return n * c.cfg.BlockSize
}

// CachedBlocks returns how many leading blocks of a prompt this rank holds
// on the GPU right now (what an oracle router would know).
func (c *Core) CachedBlocks(prompt []uint32, keys *kvstore.Keys) int {
	hs, err := c.hasher.Hash(nil, prompt, keys)
	if err != nil {
		return 0
	}
	n := 0
	for _, h := range hs[:min(len(hs), (len(prompt)-1)/c.cfg.BlockSize)] {
		if _, ok := c.blocks.lookupGPU(h); !ok {
			break
		}
		n++
	}
	return n
}
