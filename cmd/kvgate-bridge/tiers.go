package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire"
)

// tierFlags are the engine's lower KV tiers as the flags describe them.
type tierFlags struct {
	cpuBlocks, diskBlocks, blockBytes uint64
	cpuGBps, diskGBps                 float64
	cpuLatency, diskLatency           time.Duration
}

// tierFlagNames are the flags registerTiers binds (refused with llamacpp).
var tierFlagNames = []string{"cpu-blocks", "disk-blocks", "block-bytes", "cpu-bandwidth", "cpu-latency", "disk-bandwidth", "disk-latency"}

// registerTiers binds the lower tiers' flags.
func (c *config) registerTiers(fs *flag.FlagSet) {
	fs.Uint64Var(&c.cpuBlocks, "cpu-blocks", 0, "CPU KV tier per rank, in blocks of --block-size (vLLM's offloading connector, LMCache's CPU backend); 0: vLLM's --kv-offloading-size over --block-bytes where vLLM reports it, else no CPU tier")
	fs.Uint64Var(&c.diskBlocks, "disk-blocks", 0, "disk KV tier per rank, in blocks (LMCache's local disk, vLLM's disk offloading; neither publishes its size); 0: none")
	fs.Uint64Var(&c.blockBytes, "block-bytes", 0, "KV bytes of one block, all layers (the model's bytes per token times --block-size): announced in the tier costs, and what turns vLLM's offloading GiB and LMCache's byte gauges into blocks (0: unknown, routers assume their own)")
	fs.Float64Var(&c.cpuGBps, "cpu-bandwidth", 0, "GB/s loading CPU-tier blocks into the GPU, announced to routers (0: routers assume their default, PCIe 4.0 x16)")
	fs.DurationVar(&c.cpuLatency, "cpu-latency", 0, "latency of one load from the CPU tier, announced with --cpu-bandwidth")
	fs.Float64Var(&c.diskGBps, "disk-bandwidth", 0, "GB/s loading disk-tier blocks into the GPU, announced to routers (0: routers assume their default, a PCIe 4.0 NVMe SSD)")
	fs.DurationVar(&c.diskLatency, "disk-latency", 0, "latency of one load from the disk tier, announced with --disk-bandwidth")
}

// lowerTiers checks the tier flags and returns what the bridge announces.
func (c *config) lowerTiers() (vllm.LowerTiers, error) {
	lt := vllm.LowerTiers{BlockBytes: c.blockBytes, CPUBlocks: c.cpuBlocks, DiskBlocks: c.diskBlocks}
	for _, l := range []struct {
		name    string
		tier    wire.Tier
		gbps    float64
		latency time.Duration
	}{{"cpu", wire.TierCPU, c.cpuGBps, c.cpuLatency}, {"disk", wire.TierDisk, c.diskGBps, c.diskLatency}} {
		switch {
		case l.gbps < 0 || l.gbps > 1e6 || l.latency < 0 || l.latency.Nanoseconds() > 1<<32-1:
			return lt, fmt.Errorf("--%s-bandwidth %g, --%s-latency %v: want 0..1e6 GB/s and 0..4.29s", l.name, l.gbps, l.name, l.latency)
		case l.gbps == 0 && l.latency > 0:
			return lt, fmt.Errorf("--%s-latency without --%s-bandwidth: a link needs both", l.name, l.name)
		case l.gbps > 0:
			lt.Links = append(lt.Links, wire.TierLink{Tier: l.tier, LatencyNanos: uint32(l.latency.Nanoseconds()), BytesPerSecond: uint64(l.gbps * 1e9)})
		}
	}
	return lt, nil
}
