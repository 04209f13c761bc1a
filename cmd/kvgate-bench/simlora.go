package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/cluster"
	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
)

// loraFlags are simulate's LoRA slot flags.
type loraFlags struct {
	slots    int
	loadTime time.Duration
	weights  route.AdapterWeights
}

// registerLoRA binds --max-loras and --lora-load-time.
func registerLoRA(fs *flag.FlagSet) *loraFlags {
	l := &loraFlags{weights: route.DefaultAdapterWeights()}
	fs.IntVar(&l.slots, "max-loras", 0, "LoRA adapter slots per engine rank (0: adapters are not modelled; vLLM's --max-loras)")
	fs.DurationVar(&l.loadTime, "lora-load-time", sim.DefaultLoRALoadTime, "time to load a LoRA adapter into a slot")
	fs.DurationVar(&l.weights.HeatWindow, "lora-heat-window", l.weights.HeatWindow, "kv: an adapter a load would evict costs one more load times exp(-idle/window)")
	fs.Float64Var(&l.weights.LoadMs, "lora-load-ms", l.weights.LoadMs, "kv: an adapter load's time in ms, until an engine has reported its own")
	return l
}

// run runs cfg with the LoRA flags and prints the adapter line after the
// policy's own.
func (l *loraFlags) run(cfg cluster.Config, wl *workload.Workload, stdout, stderr io.Writer) (*loadgen.Result, error) {
	var st cluster.AdapterStats
	if l.slots > 0 {
		cfg.LoRASlots, cfg.LoRALoadTime, cfg.AdapterStats, cfg.AdapterWeights = l.slots, l.loadTime, &st, l.weights
	}
	res, err := cluster.Run(cfg, wl, stderr)
	if err == nil && l.slots > 0 {
		fmt.Fprintf(stdout, "%-14s adapters: %d requests, hit %.3f, %d loads (%.1f/min), %d evictions\n", cfg.Policy,
			st.Requests, st.HitRate(), st.Loads, st.LoadsPerMinute(), st.Evictions)
	}
	return res, err
}
