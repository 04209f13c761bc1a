package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/report"
	"github.com/kvgate/kvgate/perf/routers"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// compareFlags are compare's flags beyond the load generator's: the
// policies, the routers, and either the simulated engines to start or the
// engines that run already (externalFlags).
type compareFlags struct {
	policies, kvgateBin, reportDir string
	load                           float64
	rf                             replicaFlags
	ext                            externalFlags

	engines, ranks, gpuBlocks, cpuBlocks, diskBlocks int
	profile                                          string
	// pprofListen serves this process's pprof (the simulated engines run
	// in it) for profiling a run.
	pprofListen string

	// extra are flags of the command that called compare, recorded with
	// compare's own.
	extra map[string]any
}

// register binds the flags; sim adds those of simulated engines, which
// the llamacpp command, whose engines are real, leaves out.
func (c *compareFlags) register(fs *flag.FlagSet, sim bool) {
	fs.StringVar(&c.policies, "policies", "kv,round-robin,least-load,session,approx-prefix,dynamo", "policies to compare")
	fs.StringVar(&c.kvgateBin, "kvgate", "", "kvgate binary (default: next to kvgate-bench, then $PATH)")
	fs.StringVar(&c.reportDir, "report", "", "write a Markdown report and SVG plots here")
	fs.Float64Var(&c.load, "load", 1, "offered load: arrivals this many times denser than the workload's, engines at --speed")
	c.rf.register(fs)
	if !sim {
		return
	}
	c.ext.register(fs)
	fs.IntVar(&c.engines, "engines", 8, "simulated engines (without --engine-addrs or --http-engines)")
	fs.IntVar(&c.ranks, "ranks", 1, "data-parallel ranks per simulated engine, each with its own scheduler and --gpu-blocks of cache")
	fs.StringVar(&c.profile, "sim-profile", "default", "engine timing profile: default, zero, or a JSON file")
	fs.IntVar(&c.gpuBlocks, "gpu-blocks", 16384, "GPU KV blocks per simulated engine (16 tokens each)")
	fs.IntVar(&c.cpuBlocks, "cpu-blocks", 0, "CPU tier blocks per simulated engine (0: none); GPU evictions move there")
	fs.IntVar(&c.diskBlocks, "disk-blocks", 0, "disk tier blocks per simulated engine (0: none); CPU-tier evictions move there")
	fs.StringVar(&c.pprofListen, "pprof-listen", "", "serve /debug/pprof of this process (the simulated engines) on this address, and print each kvgate's admin address (its own /debug/pprof)")
}

// servePprof serves net/http/pprof on addr until ctx ends and says where.
func servePprof(ctx context.Context, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	fmt.Fprintf(stderr, "pprof of the simulated engines at http://%s/debug/pprof/\n", ln.Addr())
	return nil
}

// cmdCompare replays one workload under each policy: either against a
// fresh cluster per policy, N simulated engines in this process (real TCP
// on loopback, cold caches) and a kvgate process routing to them, or
// against engines that run already (--engine-addrs, --http-engines), with
// only the kvgate processes started per policy and the engines' caches
// flushed between policies where they can be (--llamacpp).
func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var l loadFlags
	l.register(fs)
	var c compareFlags
	c.register(fs, true)
	wl, err := l.parse(fs, args)
	if err != nil {
		return err
	}
	if err := c.rf.check(); err != nil {
		return err
	}
	if err := c.ext.check(); err != nil {
		return err
	}
	wl.Denser(c.load)
	bin, err := routers.FindKvgate(c.kvgateBin)
	if err != nil {
		return err
	}
	if c.ext.external() {
		return compareExternal(ctx, &l, &c, bin, wl, stdout, stderr)
	}
	prof, err := sim.LoadProfile(c.profile)
	if err != nil {
		return err
	}
	if c.ranks < 1 {
		return fmt.Errorf("--ranks %d: want at least 1", c.ranks)
	}
	if c.pprofListen != "" {
		if err := servePprof(ctx, c.pprofListen, stderr); err != nil {
			return err
		}
	}
	out := c.comparison(&l)
	for k, v := range map[string]any{"engines": c.engines, "ranks": c.ranks, "sim_profile": prof.Name, "gpu_blocks": c.gpuBlocks,
		"cpu_blocks": c.cpuBlocks, "disk_blocks": c.diskBlocks} {
		out.Flags[k] = v
	}
	return eachPolicy(ctx, out, c.policies, l.jsonOut, c.reportDir, stdout, func(policy string) (*loadgen.Result, error) {
		fmt.Fprintf(stderr, "== %s: %d requests of %s on %d engines\n", policy, len(wl.Requests), l.workload, c.engines)
		return comparePolicy(ctx, policy, bin, c.engines, c.ranks, prof, [3]int{c.gpuBlocks, c.cpuBlocks, c.diskBlocks}, &l, &c.rf, wl,
			c.pprofListen != "", stderr)
	})
}

// comparison is an empty comparison with the flags every compare records.
func (c *compareFlags) comparison(l *loadFlags) *comparison {
	cmp := &report.Comparison{Workload: l.workload, Policies: map[string]*loadgen.Result{}, Flags: l.flagMap()}
	cmp.Flags["policies"], cmp.Flags["load"] = c.policies, c.load
	for k, v := range c.extra {
		cmp.Flags[k] = v
	}
	c.rf.record(cmp.Flags)
	return &comparison{Comparison: cmp}
}

// comparison is what compare writes as JSON: the report's comparison and,
// for engines that count their own prompt tokens, those counts per policy.
type comparison struct {
	*report.Comparison
	// EngineCounters are, per policy, the engines' own counters over its
	// run (engineRun); empty when no engine was asked.
	EngineCounters map[string]*engineRun `json:"engine_counters,omitempty"`
}

// eachPolicy runs one measurement per policy into out, prints each result,
// and writes the JSON and the report.
func eachPolicy(ctx context.Context, out *comparison, policies, jsonOut, reportDir string, stdout io.Writer,
	measure func(policy string) (*loadgen.Result, error)) error {
	for _, policy := range strings.Split(policies, ",") {
		policy = strings.TrimSpace(policy)
		res, err := measure(policy)
		if err != nil {
			return fmt.Errorf("policy %s: %w", policy, err)
		}
		printResult(stdout, policy, res)
		if run := out.EngineCounters[policy]; run != nil {
			run.print(stdout)
		}
		out.Policies[policy] = res
		out.Order = append(out.Order, policy)
		if ctx.Err() != nil {
			break
		}
	}
	if len(out.EngineCounters) > 0 {
		printEngineTable(stdout, out)
	}
	if err := writeJSON(orDiscard(jsonOut), out); err != nil {
		return err
	}
	if reportDir == "" {
		return nil
	}
	if err := out.WriteDir(reportDir); err != nil {
		return err
	}
	return out.appendEngineTable(reportDir)
}

func orDiscard(path string) string {
	if path == "" {
		return os.DevNull
	}
	return path
}

// comparePolicy runs the workload through kvgate under policy in front of n
// fresh simulated engines of ranks data-parallel ranks, each rank with
// tiers of GPU, CPU and disk blocks.
func comparePolicy(ctx context.Context, policy, bin string, n, ranks int, prof sim.Profile, tiers [3]int,
	l *loadFlags, rf *replicaFlags, wl *workload.Workload, admins bool, progress io.Writer) (*loadgen.Result, error) {
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile = l.model, prof
	cfg.Rank.GPUBlocks, cfg.Rank.CPUBlocks, cfg.Rank.DiskBlocks = tiers[0], tiers[1], tiers[2]
	cfg.Speed, cfg.DPRanks = l.speed, max(ranks, 1)
	// LOAD every 50 ms of engine time, as in simulate, not of wall time.
	cfg.LoadInterval = max(time.Duration(float64(cfg.LoadInterval)/l.speed), time.Millisecond)
	cfg.Rank.MaxModelLen = 1 << 20 // traces hold prompts beyond 128k tokens
	engines, err := sim.StartLocal(n, cfg, "engine")
	if err != nil {
		return nil, err
	}
	defer engines.Close()
	ids, addrs := engines.IDs, engines.Addrs
	rs, base, err := rf.startRouters(ctx, bin, policy, addrs, nil)
	if err != nil {
		return nil, err
	}
	defer rs.Stop()
	if admins {
		for i, a := range rs.Admins {
			fmt.Fprintf(progress, "kvgate %d (pid %d): admin at %s/debug/pprof/\n", i, rs.Pids()[i], a)
		}
	}
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
