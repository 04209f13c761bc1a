package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
	"github.com/kvgate/kvgate/wire"
)

// policyGroupBlind is kv with a group-blind index: the pool asks engines
// for no KV cache groups and takes every event as one full-attention cache
// (engine.Config.GroupBlind), as routers did before groups.
const policyGroupBlind = "kv-group-blind"

// cmdHybrid replays a multi-turn workload against hybrid-model engines
// (perf/sim on loopback, the real wire protocol) through an in-process
// router per policy, and reports how often the router's predicted hit
// (Decision.PredictedCached) is exactly the cached tokens the engine then
// reports in its first TOKENS frame, with hit rate and TTFT.
func cmdHybrid(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hybrid", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("workload", "multi-turn:sessions=24,turns=6,system=1024,user=192,output=48,think=3,rate=6", "workload SPEC (a multi-turn one)")
	profiles := fs.String("sim-profile", "gptoss-like,qwen3next-like", "engine profiles, comma-separated (hybrid ones: gptoss-like, qwen3next-like, or JSON files)")
	policies := fs.String("policies", "kv,"+policyGroupBlind, "policies: kv and the group-blind baseline "+policyGroupBlind+" (any route policy is accepted)")
	engines := fs.Int("engines", 4, "simulated engines")
	gpuBlocks := fs.Int("gpu-blocks", 2048, "GPU KV blocks per engine, shared by the model's groups")
	speed := fs.Float64("speed", 10, "time scale of the engines and of the arrivals")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wl, err := workload.Parse(*spec)
	if err != nil {
		return err
	}
	for _, name := range strings.Split(*profiles, ",") {
		prof, err := sim.LoadProfile(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "== %s: %d engines x %d GPU blocks, %d groups, %s\n", prof.Name, *engines, *gpuBlocks, len(prof.Groups), *spec)
		for _, p := range strings.Split(*policies, ",") {
			p = strings.TrimSpace(p)
			res, exact, err := hybridRun(ctx, wl, prof, p, *engines, *gpuBlocks, *speed)
			if err != nil {
				return fmt.Errorf("%s, policy %s: %w", prof.Name, p, err)
			}
			printResult(stdout, p, res)
			fmt.Fprintf(stdout, "%-14s prediction exact: %.1f%% (%d of %d requests)\n", p, 100*float64(exact)/float64(max(res.Requests, 1)), exact, res.Requests)
		}
	}
	return nil
}

// hybridRun replays wl once on fresh engines with one policy; it returns
// the result and how many predictions were exact.
func hybridRun(ctx context.Context, wl *workload.Workload, prof sim.Profile, policy string, n, gpuBlocks int, speed float64) (*loadgen.Result, int, error) {
	scfg := sim.DefaultConfig()
	scfg.Rank.Profile, scfg.Rank.GPUBlocks, scfg.Speed = prof, gpuBlocks, speed
	fleet, err := sim.StartLocal(n, scfg, "hybrid")
	if err != nil {
		return nil, 0, err
	}
	defer fleet.Close()
	pcfg := engine.DefaultConfig()
	pcfg.GroupBlind = policy == policyGroupBlind
	pool := engine.NewPool(pcfg, kvstore.New(kvstore.Options{}), fleet.Addrs)
	defer pool.Close()
	rp := route.PolicyKV
	if policy != policyGroupBlind {
		if rp, err = route.ParsePolicy(policy); err != nil {
			return nil, 0, err
		}
	}
	router := route.New(pool, rp, route.DefaultWeights())
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(wctx, n); err != nil {
		return nil, 0, err
	}
	rec := loadgen.NewRecorder()
	var exact atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range wl.Requests {
		req := &wl.Requests[i]
		if d := time.Until(start.Add(time.Duration(float64(req.At) / speed))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := hybridRequest(ctx, router, rec, scfg.Rank.Model, fmt.Sprint(i), req, time.Since(start))
			switch {
			case err != nil:
				rec.Fail(err.Error())
			case ok:
				exact.Add(1)
			}
		}()
	}
	wg.Wait()
	return rec.Finish(time.Since(start), wl.Spec), int(exact.Load()), nil
}

// hybridRequest routes and runs one request, records it, and reports
// whether the router predicted its cached tokens exactly.
func hybridRequest(ctx context.Context, router *route.Router, rec *loadgen.Recorder, model, id string, req *workload.Request, at time.Duration) (bool, error) {
	t0 := time.Now()
	d, err := router.Route(&route.Request{Model: model, Tokens: req.Prompt, Session: req.Session})
	if err != nil {
		return false, err
	}
	defer d.Done()
	s, err := d.Engine.Generate(&wire.Generate{RequestID: []byte(id), Model: []byte(model), MaxTokens: uint32(max(req.Output, 1)),
		TopP: 1, Flags: wire.GenIgnoreEOS, DPRank: d.WireRank(), Prompt: wire.TokensOf(req.Prompt)})
	if err != nil {
		return false, err
	}
	var ttft time.Duration
	cached, out := -1, 0
	for {
		select {
		case <-s.Ready():
		case <-ctx.Done():
			s.Cancel(wire.CancelClientGone)
			return false, ctx.Err()
		}
		evs := s.Take()
		for _, ev := range evs {
			if ev.Err != nil {
				return false, ev.Err
			}
			if ev.First {
				ttft, cached = time.Since(t0), int(ev.Cached)
				d.FirstToken()
			}
			out += len(ev.Tokens)
			if ev.Last {
				if cached < 0 {
					return false, errors.New("stream ended before its first token")
				}
				rec.OK(d.Engine.Addr, at, ttft, time.Since(t0), nil, len(req.Prompt), cached, out)
				return cached == d.PredictedCached, nil
			}
		}
		s.Release(evs)
	}
}
