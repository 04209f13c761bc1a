package main

import (
	"errors"
	"flag"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
)

// disaggFlags tune prefill/decode disaggregation (engines of role
// prefill in the pool, policy kv): the latency targets the split decision
// weighs (route.SplitTargets, in the routing weights) and the wait for a
// hand-off's KV transfer (gateway.Gateway.TransferTimeout).
type disaggFlags struct {
	weights         *route.Weights
	transferTimeout time.Duration
}

func (d *disaggFlags) register(fs *flag.FlagSet, w *route.Weights) {
	d.weights = w
	fs.DurationVar(&w.SplitTargets.TTFT, "split-ttft-target", 0, "kv with prefill engines: the time-to-first-token target the split decision weighs: where only one of serving a request aggregated or split is predicted to meet the targets, it is taken, else the faster (0: no TTFT target)")
	fs.DurationVar(&w.SplitTargets.TPOT, "split-tpot-target", 0, "kv with prefill engines: the time-per-output-token target the split decision weighs, the KV transfer spread over the request's max_tokens (0: no TPOT target)")
	fs.DurationVar(&d.transferTimeout, "kv-transfer-timeout", 0, "a disaggregated request's wait, from the hand-off, for the decode engine's first token (the KV having crossed) before its stream ends with an error (0: --first-token-timeout; at most 30s, as long as the prefill engine keeps the KV)")
}

// check refuses negative targets and a negative timeout.
func (d *disaggFlags) check() error {
	if d.weights.SplitTargets.TTFT < 0 || d.weights.SplitTargets.TPOT < 0 || d.transferTimeout < 0 {
		return errors.New("--split-ttft-target, --split-tpot-target and --kv-transfer-timeout must not be negative")
	}
	return nil
}
