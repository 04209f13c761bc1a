package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/kvgate/kvgate/perf/routers"
)

// replicaFlags run several kvgate replicas in front of the same engines,
// synced through the replica ring or not, with the load spread over them.
type replicaFlags struct {
	n, targets int
	sync       string
	interval   time.Duration
}

func (r *replicaFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.n, "replicas", 1, "kvgate replicas in front of the engines; requests go to them in turn")
	fs.StringVar(&r.sync, "sync", "broadcast", "replica sync: none (each routes alone), rounds (ring all-reduce only), broadcast (rounds and reservation broadcast)")
	fs.DurationVar(&r.interval, "sync-interval", 5*time.Millisecond, "ring all-reduce interval")
	fs.IntVar(&r.targets, "target-replicas", 0, "send requests to the first K replicas only (0: all); the others run, hear every engine and join the ring")
}

func (r *replicaFlags) check() error {
	if _, err := routers.ParseSync(r.sync); err != nil {
		return err
	}
	if r.n < 1 || r.targets < 0 || r.targets > r.n {
		return fmt.Errorf("--replicas %d, --target-replicas %d: at least 1 replica, at most that many targets", r.n, r.targets)
	}
	return nil
}

func (r *replicaFlags) record(flags map[string]any) {
	flags["replicas"], flags["sync"], flags["sync_interval"], flags["target_replicas"] = r.n, r.sync, r.interval.String(), r.targets
}

// startRouters starts the replicas (kvgate processes) in front of the
// wire-protocol engines and the HTTP engines, and returns them and the
// base URLs to send requests to, joined by commas (the load generator's
// multi-target form).
func (r *replicaFlags) startRouters(ctx context.Context, bin, policy string, engines, httpEngines []string) (*routers.Routers, string, error) {
	sync, err := routers.ParseSync(r.sync)
	if err != nil {
		return nil, "", err
	}
	rs, err := routers.Start(ctx, routers.Options{Binary: bin, Policy: policy, Engines: engines, HTTPEngines: httpEngines,
		Replicas: r.n, Sync: sync, SyncInterval: r.interval})
	if err != nil {
		return nil, "", err
	}
	bases := rs.Bases
	if r.targets > 0 {
		bases = bases[:r.targets]
	}
	return rs, strings.Join(bases, ","), nil
}
