package route

import (
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TierLink is one lower tier's path into an engine's GPU as the kv cost
// weighs it: a latency per load plus bytes over the bandwidth.
type TierLink struct {
	LatencyMs  float64
	BytesPerMs float64
}

// TierCosts are what a lower-tier hit costs one engine: loading n blocks of
// tier t takes Links[t].LatencyMs + n x BlockBytes / Links[t].BytesPerMs.
// The zero value means "not known": Weights' defaults apply.
type TierCosts struct {
	BlockBytes float64
	Links      [kvstore.NumTiers]TierLink // TierGPU's is unused
}

// Default tier figures, the same published ones kvgate-sim defaults to
// (perf/sim/tiers.go): CPU memory over PCIe 4.0 x16 (31.5 GB/s per
// direction, ~80% reached: 25 GB/s, 10 us), disk a PCIe 4.0 x4 NVMe SSD
// (7.45 GB/s sequential read, Samsung 990 PRO; 100 us); KV of Qwen3-8B
// (36 layers x 8 KV heads x 128 dims x K,V x 2 bytes = 147,456 bytes per
// token).
var (
	DefaultCPULink         = TierLink{LatencyMs: 0.01, BytesPerMs: 25e6}
	DefaultDiskLink        = TierLink{LatencyMs: 0.1, BytesPerMs: 7.45e6}
	DefaultKVBytesPerToken = 147456.0
)

// TransferMs is the time to load n blocks of tier t (0 for none).
func (tc *TierCosts) TransferMs(t kvstore.Tier, n uint32) float64 {
	if t >= kvstore.NumTiers {
		return 0
	}
	return tc.Links[t].ms(n, tc.BlockBytes)
}

// ms is the time to load n blocks of blockBytes each over l.
func (l *TierLink) ms(n uint32, blockBytes float64) float64 {
	if n == 0 {
		return 0
	}
	ms := l.LatencyMs
	if l.BytesPerMs > 0 {
		ms += float64(n) * blockBytes / l.BytesPerMs
	}
	return ms
}

// TierCostsOf turns what an engine announced (wire.TierCosts, possibly
// empty) into the cost's units, filling what it lacks from w's defaults:
// the block's bytes from KVBytesPerToken and blockSize, a tier's link from
// CPULink or DiskLink.
func (w *Weights) TierCostsOf(a *wire.TierCosts, blockSize int) TierCosts {
	tc := TierCosts{BlockBytes: float64(a.BlockBytes)}
	if tc.BlockBytes == 0 {
		tc.BlockBytes = w.KVBytesPerToken * float64(blockSize)
	}
	tc.Links[kvstore.TierCPU], tc.Links[kvstore.TierDisk] = w.CPULink, w.DiskLink
	for _, l := range a.Links {
		if l.Tier > wire.TierGPU && int(l.Tier) < kvstore.NumTiers && l.BytesPerSecond > 0 {
			tc.Links[l.Tier] = TierLink{LatencyMs: float64(l.LatencyNanos) / 1e6, BytesPerMs: float64(l.BytesPerSecond) / 1e3}
		}
	}
	return tc
}

// lowerTiers weighs a match's CPU and disk blocks: the blocks it still
// counts as uncached (only under a fixed CPUBlockCost or DiskBlockCost,
// the override) and the ms of transfer for the rest, at c's tier costs.
func (w *Weights) lowerTiers(c *Candidate) (uncachedBlocks, transferMs float64) {
	bb, cpu, disk := c.Tiers.BlockBytes, &c.Tiers.Links[kvstore.TierCPU], &c.Tiers.Links[kvstore.TierDisk]
	if bb == 0 { // nothing announced: the defaults
		bb, cpu, disk = w.KVBytesPerToken*float64(c.BlockSize), &w.CPULink, &w.DiskLink
	}
	if n := c.Match.Blocks[kvstore.TierCPU]; w.CPUBlockCost >= 0 {
		uncachedBlocks += float64(n) * w.CPUBlockCost
	} else {
		transferMs += cpu.ms(n, bb)
	}
	if n := c.Match.Blocks[kvstore.TierDisk]; w.DiskBlockCost >= 0 {
		uncachedBlocks += float64(n) * w.DiskBlockCost
	} else {
		transferMs += disk.ms(n, bb)
	}
	return uncachedBlocks, transferMs
}
