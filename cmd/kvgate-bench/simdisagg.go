package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/cluster"
	"github.com/kvgate/kvgate/perf/loadgen"
)

// disaggFlags are simulate's prefill/decode disaggregation flags and its
// goodput targets (perf/cluster handoff.go).
type disaggFlags struct {
	prefill    int
	always     bool
	goodput    bool
	ttft, tpot time.Duration
	// splitSLO: the routers weigh ttft and tpot in their split decisions.
	splitSLO bool
}

func registerDisagg(fs *flag.FlagSet) *disaggFlags {
	d := &disaggFlags{}
	fs.IntVar(&d.prefill, "prefill-engines", 0, "kv: this many of the engines are prefill engines, the rest decode engines (0: every engine serves both)")
	fs.BoolVar(&d.always, "disagg-always", false, "with --prefill-engines: split every request (no conditional disaggregation)")
	fs.BoolVar(&d.goodput, "goodput", false, "print each policy's goodput: requests/s within --ttft-slo and --tpot-slo")
	fs.DurationVar(&d.ttft, "ttft-slo", 2*time.Second, "goodput: a request's time-to-first-token target")
	fs.DurationVar(&d.tpot, "tpot-slo", 100*time.Millisecond, "goodput: a request's time-per-output-token target (after the first)")
	fs.BoolVar(&d.splitSLO, "split-slo", false, "with --prefill-engines: the routers weigh --ttft-slo and --tpot-slo in each split decision, the request's output length as its max_tokens (kvgate --split-ttft-target, --split-tpot-target)")
	return d
}

// apply sets cfg's split and targets and returns where the goodput lands.
func (d *disaggFlags) apply(cfg *cluster.Config) *cluster.GoodputStats {
	cfg.Disagg = cluster.Disagg{Prefill: d.prefill, Always: d.always}
	cfg.SLO = cluster.SLO{TTFT: d.ttft, TPOT: d.tpot}
	if d.splitSLO {
		cfg.Weights.SplitTargets = route.SplitTargets{TTFT: d.ttft, TPOT: d.tpot}
	}
	cfg.Goodput = &cluster.GoodputStats{}
	return cfg.Goodput
}

// print writes a run's goodput line.
func (d *disaggFlags) print(stdout io.Writer, policy string, g *cluster.GoodputStats, res *loadgen.Result, err error) {
	if !d.goodput || err != nil || g.Requests == 0 {
		return
	}
	fmt.Fprintf(stdout, "%-14s goodput %.3f req/s of %.3f (TTFT <= %v: %d, TPOT <= %v: %d, both: %d of %d; %d split, %d prefill engines%s)\n",
		policy, g.Goodput(), res.RequestsPerS, d.ttft, g.TTFTMet, d.tpot, g.TPOTMet, g.Met, g.Requests, g.Split, d.prefill, d.ruleNote())
}

// ruleNote says, on the goodput line, whether the split rule weighed the targets.
func (d *disaggFlags) ruleNote() string {
	if d.splitSLO && d.prefill > 0 && !d.always {
		return "; split rule weighs the targets"
	}
	return ""
}
