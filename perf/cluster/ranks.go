package cluster

import (
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
)

// Data-parallel ranks: engine e's rank k is the core engines[e*ranks+k],
// with its own scheduler, cache (index slot) and LOAD reports. Routing by
// rank (every policy but PolicyRankBlind) takes each core as a candidate,
// as the live router takes each (engine, rank). PolicyRankBlind routes as
// kvgate did before: the engine's rank 0 stands for the engine.

// rankBlind reports whether the run routes without ranks although the
// engines have several.
func (s *Sim) rankBlind() bool { return s.cfg.Policy == PolicyRankBlind && s.ranks > 1 }

// candidates are the cores a kv-like policy scores: every core, or under
// PolicyRankBlind each engine's rank 0 (its cache the only one matched).
func (s *Sim) candidates() []int {
	step := 1
	if s.rankBlind() {
		step = s.ranks
	}
	out := make([]int, 0, len(s.engines)/step)
	for c := 0; c < len(s.engines); c += step {
		if s.isPrefill(c) {
			continue // prefill engines take split requests only (handoff.go)
		}
		out = append(out, c)
	}
	return out
}

// pickSlots is the slots of cands.
func pickSlots(slots []kvstore.Slot, cands []int) []kvstore.Slot {
	out := make([]kvstore.Slot, len(cands))
	for i, c := range cands {
		out[i] = slots[c]
	}
	return out
}

// reportPlace is where core c's LOAD report lands in a router's view: its
// own place, or under PolicyRankBlind its engine's rank 0, which every
// rank's report overwrites in turn (the one engine-wide LOAD kvgate kept).
func (s *Sim) reportPlace(c int) int {
	if s.rankBlind() {
		return c - c%s.ranks
	}
	return c
}

// runsOn is the core a request routed to core c runs on: c itself when the
// GENERATE names its rank, or under PolicyRankBlind ("any rank") the
// engine's rank with the fewest requests running and waiting, first on a
// tie, as kvgate-sim's server picks (sim.Server.pickRank).
func (s *Sim) runsOn(c int) int {
	if !s.rankBlind() {
		return c
	}
	base, best, bestN := c-c%s.ranks, c, -1
	for k := range s.ranks {
		l := s.engines[base+k].core.Load()
		if n := int(l.Running + l.Waiting); bestN < 0 || n < bestN {
			best, bestN = base+k, n
		}
	}
	return best
}

// peerOf is the other routers' load on core e as router r sees it. The
// ring sums load per engine, not per rank, so each rank of an engine with
// several sees the engine's sum shared evenly among its ranks, as
// route.Router does; its own LOAD reports tell the ranks apart.
func (s *Sim) peerOf(r *routerState, e int) syncring.Load {
	if s.ranks == 1 || s.rankBlind() {
		return r.peer[e]
	}
	base := e - e%s.ranks
	var sum syncring.Load
	for k := range s.ranks {
		sum = addLoad(sum, r.peer[base+k])
	}
	n := int64(s.ranks)
	return syncring.Load{PrefillTokens: sum.PrefillTokens / n, DecodeTokens: sum.DecodeTokens / n, Requests: sum.Requests / n}
}
