package main

import (
	"errors"
	"flag"
	"fmt"
)

// checkDPRank validates --dp-rank, vLLM's external data parallelism: each
// rank has its own API server (and KV event endpoint, at the base port plus
// the rank), so each has its own bridge, an engine of one rank to routers.
// Several such engines share a host; each needs its own id, so a bridge
// given no --id takes HOST-bridge-dpRANK.
func (c *config) checkDPRank(fs *flag.FlagSet, host string) error {
	switch {
	case c.dpRank < -1:
		return fmt.Errorf("--dp-rank %d: a rank is 0 or more", c.dpRank)
	case c.dpRank < 0:
		return nil
	case c.engineKind != kindVLLM:
		return errors.New("--dp-rank: vLLM's external data parallelism only (--engine-kind vllm)")
	case c.dpRanks != 1:
		return errors.New("--dp-rank fronts one rank of an external data-parallel deployment: not with --dp-ranks")
	}
	idSet := false
	fs.Visit(func(f *flag.Flag) { idSet = idSet || f.Name == "id" })
	if !idSet {
		c.id = fmt.Sprintf("%s-bridge-dp%d", host, c.dpRank)
	}
	return nil
}
