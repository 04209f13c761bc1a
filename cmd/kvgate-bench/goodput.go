package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/cluster"
	"github.com/kvgate/kvgate/perf/report"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// cmdGoodput sweeps, in virtual time under kv, aggregated serving on
// --engines engines against each prefill:decode split of the same
// engines, in each --modes, over --loads, and writes goodput over load
// (report.GoodputSweep: a table, goodput.svg, goodput.json).
func cmdGoodput(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("goodput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("workload", "", "workload SPEC")
	engines := fs.Int("engines", 8, "simulated engines")
	routers := fs.Int("routers", 1, "router replicas")
	gpuBlocks := fs.Int("gpu-blocks", 16384, "GPU KV blocks per engine")
	maxRequests := fs.Int("max-requests", 0, "replay only the workload's first N requests (0: all)")
	loads := fs.String("loads", "1,2,3,4", "offered loads (arrivals this many times denser than the workload's)")
	splits := fs.String("splits", "2,4,6", "prefill engines of each split (the rest decode)")
	modes := fs.String("modes", "conditional,rule,always", "split modes: conditional (the router's choice on speed), rule (conditional weighing the targets: --split-slo), always (every request split)")
	ttft := fs.Duration("ttft-slo", 2*time.Second, "a request's time-to-first-token target")
	tpot := fs.Duration("tpot-slo", 100*time.Millisecond, "a request's time-per-output-token target (after the first)")
	seed := fs.Uint64("seed", 1, "seed of the routers' random choices")
	out := fs.String("out", "", "write README.md, goodput.svg and goodput.json here")
	replot := fs.String("replot", "", "run nothing: write --out from this goodput.json of an earlier sweep")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replot != "" {
		return replotGoodput(*replot, *out)
	}
	ls, err := floatList(*loads)
	if err != nil {
		return fmt.Errorf("--loads: %w", err)
	}
	ps, err := parseInts(*splits) // streams.go
	if err != nil {
		return fmt.Errorf("--splits: %w", err)
	}
	fleets, err := goodputFleets(*engines, ps, strings.Split(*modes, ","))
	if err != nil {
		return err
	}
	rank := sim.DefaultConfig().Rank
	rank.GPUBlocks, rank.MaxModelLen = *gpuBlocks, 1<<20
	sw := &report.GoodputSweep{Workload: *spec, TTFT: ttft.String(), TPOT: tpot.String(), Flags: map[string]any{
		"engines": *engines, "routers": *routers, "gpu_blocks": *gpuBlocks, "max_requests": *maxRequests, "seed": *seed,
		"mode": "virtual time (perf/cluster), policy kv"}}
	for _, load := range ls {
		wl, err := workload.Parse(*spec)
		if err != nil {
			return err
		}
		wl.Prefix(*maxRequests)
		wl.Denser(load)
		for _, f := range fleets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			cfg := clusterConfig(*engines, *routers, route.PolicyKV, rank, *seed)
			cfg.Disagg = cluster.Disagg{Prefill: f.prefill, Always: f.always}
			cfg.SLO = cluster.SLO{TTFT: *ttft, TPOT: *tpot}
			if f.rule {
				cfg.Weights.SplitTargets = route.SplitTargets{TTFT: *ttft, TPOT: *tpot}
			}
			cfg.Goodput = &cluster.GoodputStats{}
			fmt.Fprintf(stderr, "== x%g %s: %d requests\n", load, f.name, len(wl.Requests))
			res, err := cluster.Run(cfg, wl, stderr)
			if err != nil {
				return fmt.Errorf("x%g %s: %w", load, f.name, err)
			}
			g := cfg.Goodput
			run := report.GoodputRun{Series: f.name, Load: load, Goodput: g.Goodput(), Throughput: res.RequestsPerS,
				Requests: g.Requests, Met: g.Met, TTFTMet: g.TTFTMet, TPOTMet: g.TPOTMet, Split: g.Split,
				TTFTP50: res.TTFT.P50, TTFTP99: res.TTFT.P99, ITLP50: res.ITL.P50, Hit: res.PrefixHitRate}
			sw.Runs = append(sw.Runs, run)
			fmt.Fprintf(stdout, "x%-4g %-28s goodput %7.3f req/s of %7.3f (TTFT ok %d, TPOT ok %d, both %d of %d; %d split)\n",
				load, f.name, run.Goodput, run.Throughput, run.TTFTMet, run.TPOTMet, run.Met, run.Requests, run.Split)
		}
	}
	if *out == "" {
		return nil
	}
	sw.Against = ruleAgainst(sw.Series())
	return sw.WriteDir(*out)
}

// ruleSuffix names a split's series whose routers weigh the targets.
const ruleSuffix = " + TPOT rule"

// ruleAgainst compares each rule series with the same split without it.
func ruleAgainst(series []string) map[string]string {
	m := map[string]string{}
	for _, name := range series {
		if base, ok := strings.CutSuffix(name, ruleSuffix); ok {
			m[name] = base
		}
	}
	return m
}

// replotGoodput writes dir from the goodput.json at path.
func replotGoodput(path, dir string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var sw report.GoodputSweep
	if err := json.Unmarshal(b, &sw); err != nil {
		return fmt.Errorf("--replot %s: %w", path, err)
	}
	if sw.Against == nil {
		sw.Against = ruleAgainst(sw.Series())
	}
	if dir == "" {
		return errors.New("--replot needs --out")
	}
	return sw.WriteDir(dir)
}

// goodputFleet is one series of a goodput sweep.
type goodputFleet struct {
	name         string
	prefill      int
	always, rule bool
}

// goodputFleets is aggregated on all engines, then each split in each mode.
func goodputFleets(engines int, splits []int, modes []string) ([]goodputFleet, error) {
	fleets := []goodputFleet{{name: fmt.Sprintf("%d aggregated", engines)}}
	for _, p := range splits {
		if p <= 0 || p >= engines {
			return nil, fmt.Errorf("--splits: %d prefill engines of %d leaves no decode engine", p, engines)
		}
		for _, m := range modes {
			f := goodputFleet{name: fmt.Sprintf("%d:%d %s", p, engines-p, strings.TrimSpace(m)), prefill: p}
			switch strings.TrimSpace(m) {
			case "conditional":
			case "rule":
				f.rule, f.name = true, fmt.Sprintf("%d:%d conditional", p, engines-p)+ruleSuffix
			case "always":
				f.always = true
			default:
				return nil, fmt.Errorf("--modes: unknown mode %q (conditional, rule, always)", m)
			}
			fleets = append(fleets, f)
		}
	}
	return fleets, nil
}

// clusterConfig is a virtual-time cluster of simulate's and goodput's
// shape: network and sync delays of one datacenter, LOAD every 50 ms.
func clusterConfig(engines, routers int, policy route.Policy, rank sim.RankConfig, seed uint64) cluster.Config {
	return cluster.Config{Engines: engines, Routers: routers, Policy: policy, Weights: route.DefaultWeights(), Rank: rank,
		SyncDelay: 5 * time.Millisecond, NetDelay: 200 * time.Microsecond, LoadPeriod: 50 * time.Millisecond, Seed: seed}
}

func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%q: want positive numbers, comma-separated", s)
		}
		out = append(out, v)
	}
	return out, nil
}
