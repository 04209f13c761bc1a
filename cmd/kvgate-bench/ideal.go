package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/cluster"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// cmdIdeal prints the hit rate of one pooled LRU cache per size
// (cluster.PooledLRU): what a perfect placement over engines whose tiers
// add up to that size approaches.
func cmdIdeal(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ideal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("workload", "", "workload SPEC")
	sizes := fs.String("blocks", "131072", "pooled cache sizes in blocks, comma-separated (engines x (GPU + CPU + disk) blocks)")
	maxRequests := fs.Int("max-requests", 0, "only the workload's first N requests (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wl, err := workload.Parse(*spec)
	if err != nil {
		return err
	}
	wl.Prefix(*maxRequests)
	rank := sim.DefaultConfig().Rank
	hc := kvstore.HashConfig{BlockSize: rank.BlockSize, Seed: rank.HashSeed, Model: rank.Model}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("--blocks %q: want a block count", s)
		}
		hit, err := cluster.PooledLRU(wl, hc, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pooled-lru %9d blocks (%d tokens): hit %.3f\n", n, n*rank.BlockSize, hit)
	}
	return nil
}
