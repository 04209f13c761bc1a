package vllm

import "github.com/kvgate/kvgate/wire"

// LowerTiers is what the bridge knows of the engine's CPU and disk KV
// tiers, for the handshake's capacities and tier costs and for LOAD:
//
//   - capacity: the flags' (per rank, in GPU-sized blocks), or vLLM's own
//     CPU offloading buffer, cache_config_info's kv_offloading_size GiB,
//     over BlockBytes. vLLM publishes no other size of its offloading
//     connector (kv_connector_extra_config's cpu_bytes_to_use or
//     num_cpu_blocks stay inside the engine: vllm/v1/kv_offload/cpu/spec.py
//     at 0072b0b7443bdddf17824c78d4feae8e1fc12fb4), and LMCache publishes
//     the use of its tiers but not their size (its max_local_cpu_size and
//     max_local_disk_size stay in its config), so those come from flags;
//   - use: LMCache's byte gauges over BlockBytes where the engine exports
//     them, else the blocks the engine's KV events put in the tier
//     (vLLM's OffloadingConnector publishes every store and eviction with
//     its medium, the BlockStored/BlockRemoved medium field of
//     vllm/distributed/kv_events.py at b4e69e0af33f4698e157a262cc787fe61983cd3d:
//     offload.go);
//   - links: the flags' bandwidth and latency, announced as TIER_COSTS;
//     a router assumes its own defaults for a tier without one.
type LowerTiers struct {
	// BlockBytes is the KV size of one block, all layers (the model's
	// bytes per token times the block size); 0: unknown.
	BlockBytes uint64
	// CPUBlocks and DiskBlocks are the tiers' capacities per rank (0: the
	// engine's own figure where it has one, else no tier).
	CPUBlocks, DiskBlocks uint64
	// Links are the tiers' paths into the GPU, at most one per tier.
	Links []wire.TierLink
}

const gib = 1 << 30

// total is tier's capacity per rank, as the flags or em say (0: none).
func (lt *LowerTiers) total(tier wire.Tier, em *EngineMetrics) uint64 {
	switch tier {
	case wire.TierCPU:
		if lt.CPUBlocks > 0 {
			return lt.CPUBlocks
		}
		if em != nil && em.OffloadGiB > 0 && lt.BlockBytes > 0 {
			return uint64(em.OffloadGiB * gib / float64(lt.BlockBytes))
		}
	case wire.TierDisk:
		return lt.DiskBlocks
	}
	return 0
}

// Capacities are the lower tiers of the handshake (after the GPU's), with
// em the engine's metrics at start (nil: none).
func (lt *LowerTiers) Capacities(em *EngineMetrics) []wire.TierCapacity {
	var out []wire.TierCapacity
	for _, t := range []wire.Tier{wire.TierCPU, wire.TierDisk} {
		if n := lt.total(t, em); n > 0 {
			out = append(out, wire.TierCapacity{Tier: t, Blocks: n})
		}
	}
	return out
}

// Costs is the handshake's tier-cost section (empty: nothing to announce).
func (lt *LowerTiers) Costs() wire.TierCosts {
	return wire.TierCosts{BlockBytes: lt.BlockBytes, Links: lt.Links}
}

// AddUsage appends the lower tiers' use to a rank's LOAD: em is its
// metrics (nil: none) and events the blocks its KV events put in each
// tier. A tier with neither capacity nor use is left out.
func (lt *LowerTiers) AddUsage(l *wire.Load, em *EngineMetrics, events [wire.NumTiers]uint64) {
	for _, t := range []wire.Tier{wire.TierCPU, wire.TierDisk} {
		used := events[t]
		if em != nil && em.HasLMCache && lt.BlockBytes > 0 {
			bytes := em.LMCacheCPUBytes
			if t == wire.TierDisk {
				bytes = em.LMCacheDiskBytes
			}
			used = uint64(bytes / float64(lt.BlockBytes))
		}
		total := lt.total(t, em)
		if total > 0 {
			used = min(used, total)
		}
		if used > 0 || total > 0 {
			l.Tiers = append(l.Tiers, wire.TierUsage{Tier: t, Used: used, Total: total})
		}
	}
}
