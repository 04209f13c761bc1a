package sim

import (
	"fmt"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TierLink is how fast a rank brings KV blocks of a lower tier back into
// the GPU: a fixed latency per step that loads from the tier, plus the
// blocks' bytes over the link's bandwidth.
type TierLink struct {
	// GBps is the bandwidth in 10^9 bytes per second.
	GBps float64
	// Latency is paid once per step that loads from the tier.
	Latency time.Duration
}

// Default links, from published figures:
//
//   - CPU: PCIe 4.0 x16 carries 31.5 GB/s per direction (16 GT/s x 16 lanes,
//     128b/130b; PCIe 5.0 x16 doubles it to 63 GB/s); pinned host-to-device
//     copies reach about 80% of that, so 25 GB/s, and 10 us to launch the
//     copies. A 16-token block of an 8B model (2.36 MB) then loads in 0.094
//     ms, what the profile's fixed 0.1 ms per CPU block used to say.
//   - Disk: a PCIe 4.0 x4 NVMe SSD reads 7.45 GB/s sequentially (Samsung 990
//     PRO's data sheet), through host memory to the GPU; 100 us for the
//     first read, the order of an NVMe random read.
var (
	DefaultCPULink  = TierLink{GBps: 25, Latency: 10 * time.Microsecond}
	DefaultDiskLink = TierLink{GBps: 7.45, Latency: 100 * time.Microsecond}
)

// LoadTime is the time to load n blocks of blockBytes each over l.
func (l TierLink) LoadTime(n int, blockBytes float64) time.Duration {
	if n <= 0 {
		return 0
	}
	d := l.Latency
	if l.GBps > 0 {
		d += time.Duration(float64(n) * blockBytes / l.GBps) // bytes / (1e9 B/s) = ns
	}
	return d
}

func (l TierLink) validate(name string) error {
	if l.GBps <= 0 || l.Latency < 0 {
		return fmt.Errorf("%s link %.3g GB/s, latency %v: bandwidth must be positive, latency not negative", name, l.GBps, l.Latency)
	}
	return nil
}

// blockBytes is the KV size of one block under the rank's profile.
func (c *RankConfig) blockBytes() float64 {
	return c.Profile.KVBytesPerToken * float64(c.BlockSize)
}

// Capacities returns the tiers the rank has and their sizes in blocks, as
// the handshake announces them (GPU first; lower tiers only when present).
func (c *RankConfig) Capacities() []wire.TierCapacity {
	out := []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: uint64(c.GPUBlocks)}}
	if c.CPUBlocks > 0 {
		out = append(out, wire.TierCapacity{Tier: wire.TierCPU, Blocks: uint64(c.CPUBlocks)})
	}
	if c.DiskBlocks > 0 {
		out = append(out, wire.TierCapacity{Tier: wire.TierDisk, Blocks: uint64(c.DiskBlocks)})
	}
	return out
}

// TierCosts returns what the handshake announces of the rank's lower tiers
// (wire.FeatureTierCosts): the block size in bytes and each present tier's
// link. It is empty when the rank has no lower tier.
func (c *RankConfig) TierCosts() wire.TierCosts {
	var tc wire.TierCosts
	for _, t := range []struct {
		tier   wire.Tier
		blocks int
		link   TierLink
	}{{wire.TierCPU, c.CPUBlocks, c.CPULink}, {wire.TierDisk, c.DiskBlocks, c.DiskLink}} {
		if t.blocks <= 0 {
			continue
		}
		link := t.link
		if link == (TierLink{}) {
			link = map[wire.Tier]TierLink{wire.TierCPU: DefaultCPULink, wire.TierDisk: DefaultDiskLink}[t.tier]
		}
		tc.Links = append(tc.Links, wire.TierLink{Tier: t.tier, LatencyNanos: uint32(min(link.Latency.Nanoseconds(), 1<<32-1)),
			BytesPerSecond: uint64(link.GBps * 1e9)})
	}
	if len(tc.Links) > 0 {
		tc.BlockBytes = uint64(c.blockBytes())
	}
	return tc
}

// String writes the link as "25GB/s+10µs".
func (l TierLink) String() string { return fmt.Sprintf("%gGB/s+%v", l.GBps, l.Latency) }
