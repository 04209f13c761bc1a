package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/cluster"
	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/report"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// cmdSimulate runs the cluster simulation in virtual time for each policy.
func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("workload", "", "workload SPEC")
	engines := fs.Int("engines", 64, "simulated engines")
	ranks := fs.Int("ranks", 1, "data-parallel ranks per engine, each with --gpu-blocks of its own (kv-rank-blind: kv routing engines, not ranks, as before kvgate did)")
	routers := fs.Int("routers", 4, "router replicas (requests spread round-robin)")
	syncDelay := fs.Duration("sync-delay", 5*time.Millisecond, "how late routers learn peers' reservations, KV events and LOAD")
	policies := fs.String("policies", "kv,round-robin,least-load,session,approx-prefix,dynamo,oracle",
		"policies (oracle: true state, instantly; kv-tier-blind: kv whose index hears only GPU events; kv-rank-blind: kv that matches rank 0 and sends any rank; with --max-loras: kv-lora-blind, kv that does not know adapter residency, and lora-affinity, the S-LoRA/dLoRA-style baseline)")
	profile := fs.String("sim-profile", "default", "engine timing profile")
	gpuBlocks := fs.Int("gpu-blocks", 16384, "GPU KV blocks per engine")
	cpuBlocks := fs.Int("cpu-blocks", 0, "CPU-tier KV blocks per engine (0: none); GPU evictions move there")
	diskBlocks := fs.Int("disk-blocks", 0, "disk-tier KV blocks per engine (0: none); CPU-tier evictions move there")
	maxRequests := fs.Int("max-requests", 0, "replay only the workload's first N requests (0: all)")
	links := registerLinks(fs)
	weights := route.DefaultWeights()
	fs.Float64Var(&weights.PrefillTokensPerMs, "prefill-rate", weights.PrefillTokensPerMs, "kv: the engines' prefill rate in tokens/ms, as the routers assume it")
	fs.Float64Var(&weights.CPUBlockCost, "cpu-block-cost", weights.CPUBlockCost, "kv: a CPU-tier block's cost as a fraction of recomputing it (negative: its transfer time)")
	fs.Float64Var(&weights.DiskBlockCost, "disk-block-cost", weights.DiskBlockCost, "kv: a disk-tier block's cost as a fraction of recomputing it (negative: its transfer time)")
	jsonOut := fs.String("json", "", "write results as JSON")
	reportDir := fs.String("report", "", "write a Markdown report and SVG plots here")
	load := fs.Float64("load", 1, "offered load: arrivals this many times denser than the workload's")
	seed := fs.Uint64("seed", 1, "seed of the routers' random choices (ties, starting engine)")
	lora := registerLoRA(fs)
	disagg := registerDisagg(fs) // simdisagg.go
	if err := fs.Parse(args); err != nil {
		return err
	}
	wl, err := workload.Parse(*spec)
	if err != nil {
		return err
	}
	wl.Prefix(*maxRequests)
	wl.Denser(*load)
	prof, err := sim.LoadProfile(*profile)
	if err != nil {
		return err
	}
	rank := sim.DefaultConfig().Rank
	rank.Profile, rank.GPUBlocks, rank.MaxModelLen = prof, *gpuBlocks, 1<<20
	rank.CPUBlocks, rank.DiskBlocks, rank.CPULink, rank.DiskLink = *cpuBlocks, *diskBlocks, links.cpu, links.disk
	if err := rank.Validate(); err != nil {
		return err
	}
	if *ranks < 1 {
		return fmt.Errorf("--ranks %d: want at least 1", *ranks)
	}
	pooled := *engines * *ranks * (*gpuBlocks + *cpuBlocks + *diskBlocks)
	ideal, err := cluster.PooledLRU(wl, kvstore.HashConfig{BlockSize: rank.BlockSize, Seed: rank.HashSeed, Model: rank.Model}, pooled)
	if err != nil {
		return err
	}
	shape := fmt.Sprintf("%d engines", *engines)
	if *ranks > 1 {
		shape += fmt.Sprintf(" x %d ranks", *ranks)
	}
	fmt.Fprintf(stdout, "%-14s %d blocks (%s x %d GPU + %d CPU + %d disk): hit %.3f\n", "pooled-lru",
		pooled, shape, *gpuBlocks, *cpuBlocks, *diskBlocks, ideal)
	cmp := &comparison{Comparison: &report.Comparison{Workload: *spec, Policies: map[string]*loadgen.Result{}, Flags: map[string]any{
		"engines": *engines, "ranks": *ranks, "routers": *routers, "sync_delay": syncDelay.String(), "sim_profile": prof.Name,
		"gpu_blocks": *gpuBlocks, "cpu_blocks": *cpuBlocks, "disk_blocks": *diskBlocks, "max_requests": *maxRequests, "cpu_link": links.cpu.String(), "disk_link": links.disk.String(),
		"prefill_rate": weights.PrefillTokensPerMs, "cpu_block_cost": weights.CPUBlockCost, "disk_block_cost": weights.DiskBlockCost,
		"pooled_lru_hit": ideal, "load": *load, "seed": *seed, "max_loras": lora.slots, "lora_load_time": lora.loadTime.String(),
		"prefill_engines": disagg.prefill, "disagg_always": disagg.always, "split_slo": disagg.splitSLO, "ttft_slo": disagg.ttft.String(), "tpot_slo": disagg.tpot.String(), "mode": "simulate (virtual time; latencies are simulated ms)"}}}
	return eachPolicy(ctx, cmp, *policies, *jsonOut, *reportDir, stdout, func(p string) (*loadgen.Result, error) {
		policy := route.Policy(p)
		if !cluster.SimOnlyPolicy(policy) {
			if policy, err = route.ParsePolicy(p); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(stderr, "== %s: %d requests, %s, %d routers\n", p, len(wl.Requests), shape, *routers)
		cfg := clusterConfig(*engines, *routers, policy, rank, *seed) // goodput.go
		cfg.Ranks, cfg.Weights, cfg.SyncDelay = *ranks, weights, *syncDelay
		g := disagg.apply(&cfg)
		res, err := lora.run(cfg, wl, stdout, stderr)
		disagg.print(stdout, p, g, res, err)
		return res, err
	})
}

// tierLinks are the simulated engines' lower-tier links, from flags.
type tierLinks struct{ cpu, disk sim.TierLink }

// registerLinks binds --cpu-bandwidth, --cpu-latency, --disk-bandwidth and
// --disk-latency, defaulting to the simulator's published figures.
func registerLinks(fs *flag.FlagSet) *tierLinks {
	l := &tierLinks{cpu: sim.DefaultCPULink, disk: sim.DefaultDiskLink}
	fs.Float64Var(&l.cpu.GBps, "cpu-bandwidth", l.cpu.GBps, "GB/s loading CPU-tier blocks into the GPU (default: PCIe 4.0 x16)")
	fs.DurationVar(&l.cpu.Latency, "cpu-latency", l.cpu.Latency, "latency of a load from the CPU tier")
	fs.Float64Var(&l.disk.GBps, "disk-bandwidth", l.disk.GBps, "GB/s loading disk-tier blocks into the GPU (default: a PCIe 4.0 x4 NVMe SSD)")
	fs.DurationVar(&l.disk.Latency, "disk-latency", l.disk.Latency, "latency of a load from the disk tier")
	return l
}
