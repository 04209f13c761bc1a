package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/report"
	"github.com/kvgate/kvgate/perf/routers"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// cmdCompare replays one workload against a fresh cluster per policy: N
// simulated engines in this process (real TCP on loopback, cold caches) and
// a kvgate process routing to them.
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var l loadFlags
	l.register(fs)
	engines := fs.Int("engines", 8, "simulated engines")
	policies := fs.String("policies", "kv,round-robin,least-load,session,approx-prefix,dynamo", "policies to compare")
	profile := fs.String("sim-profile", "default", "engine timing profile: default, zero, or a JSON file")
	gpuBlocks := fs.Int("gpu-blocks", 16384, "GPU KV blocks per engine (16 tokens each)")
	cpuBlocks := fs.Int("cpu-blocks", 0, "CPU tier blocks per engine")
	kvgateBin := fs.String("kvgate", "", "kvgate binary (default: next to kvgate-bench, then $PATH)")
	reportDir := fs.String("report", "", "write a Markdown report and SVG plots here")
	load := fs.Float64("load", 1, "offered load: arrivals this many times denser than the workload's, engines at --speed")
	var rf replicaFlags
	rf.register(fs)
	wl, err := l.parse(fs, args)
	if err != nil {
		return err
	}
	if err := rf.check(); err != nil {
		return err
	}
	wl.Denser(*load)
	prof, err := sim.LoadProfile(*profile)
	if err != nil {
		return err
	}
	bin, err := routers.FindKvgate(*kvgateBin)
	if err != nil {
		return err
	}
	cmp := &report.Comparison{Workload: l.workload, Policies: map[string]*loadgen.Result{}, Flags: l.flagMap()}
	for k, v := range map[string]any{"engines": *engines, "sim_profile": prof.Name, "gpu_blocks": *gpuBlocks,
		"cpu_blocks": *cpuBlocks, "policies": *policies, "load": *load} {
		cmp.Flags[k] = v
	}
	rf.record(cmp.Flags)
	return eachPolicy(ctx, cmp, *policies, l.jsonOut, *reportDir, stdout, func(policy string) (*loadgen.Result, error) {
		fmt.Fprintf(stderr, "== %s: %d requests of %s on %d engines\n", policy, len(wl.Requests), l.workload, *engines)
		return comparePolicy(ctx, policy, bin, *engines, prof, *gpuBlocks, *cpuBlocks, &l, &rf, wl, stderr)
	})
}

// eachPolicy runs one measurement per policy into cmp, prints each result,
// and writes the JSON and the report.
func eachPolicy(ctx context.Context, cmp *report.Comparison, policies, jsonOut, reportDir string, stdout io.Writer,
	measure func(policy string) (*loadgen.Result, error)) error {
	for _, policy := range strings.Split(policies, ",") {
		policy = strings.TrimSpace(policy)
		res, err := measure(policy)
		if err != nil {
			return fmt.Errorf("policy %s: %w", policy, err)
		}
		printResult(stdout, policy, res)
		cmp.Policies[policy] = res
		cmp.Order = append(cmp.Order, policy)
		if ctx.Err() != nil {
			break
		}
	}
	if err := cmp.WriteJSON(orDiscard(jsonOut)); err != nil {
		return err
	}
	if reportDir != "" {
		return cmp.WriteDir(reportDir)
	}
	return nil
}

func orDiscard(path string) string {
	if path == "" {
		return os.DevNull
	}
	return path
}

func comparePolicy(ctx context.Context, policy, bin string, n int, prof sim.Profile, gpu, cpu int,
	l *loadFlags, rf *replicaFlags, wl *workload.Workload, progress io.Writer) (*loadgen.Result, error) {
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile, cfg.Rank.GPUBlocks, cfg.Rank.CPUBlocks = l.model, prof, gpu, cpu
	cfg.Speed = l.speed
	// LOAD every 50 ms of engine time, as in simulate, not of wall time.
	cfg.LoadInterval = max(time.Duration(float64(cfg.LoadInterval)/l.speed), time.Millisecond)
	cfg.Rank.MaxModelLen = 1 << 20 // traces hold prompts beyond 128k tokens
	engines, err := sim.StartLocal(n, cfg, "engine")
	if err != nil {
		return nil, err
	}
	defer engines.Close()
	ids, addrs := engines.IDs, engines.Addrs
	base, stop, err := rf.startRouters(ctx, bin, policy, addrs)
	if err != nil {
		return nil, err
	}
	defer stop()
	o, err := l.options(base, progress)
	if err != nil {
		return nil, err
	}
	res, err := loadgen.Run(ctx, o, wl)
	if err != nil {
		return nil, err
	}
	res.Flags = l.flagMap()
	res.Flags["policy"] = policy
	rf.record(res.Flags)
	res.CountEngines(ids)
	return res, nil
}
