package route

import (
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// cand is one routing candidate: a data-parallel rank of an engine. Each
// rank has its own cache (its own index slot), its own LOAD reports and
// its own share of this router's reservations; an engine without ranks is
// one candidate, rank 0.
type cand struct {
	e    *engine.Engine
	rank uint16
	// lora is the id the engine gives the request's adapter (0: the base
	// model), resolved once a decision where the candidate is found.
	lora uint32
}

// rankLoad is a router's view of one rank: its own load there and the
// queued-prefill estimate built on the rank's reports.
type rankLoad struct {
	syncring.Load
	pend PendingPrefill
}

// rankOf returns the engine's load and its rank's, growing the engine's
// ranks the first time one is seen. Call it under mu.
func (r *Router) rankOf(e *engine.Engine, rank uint16) (*engineLoad, *rankLoad) {
	l := r.loadOf(e)
	if int(rank) >= len(l.ranks) {
		grown := make([]rankLoad, int(rank)+1)
		copy(grown, l.ranks)
		for i := len(l.ranks); i < len(grown); i++ {
			grown[i].pend.Delay = int64(r.weights().ReportDelay)
		}
		l.ranks = grown
	}
	return l, &l.ranks[rank]
}

// report is pend.Report of report seq, which arrived at at. The clock is
// converted only for a report pend has not seen: most decisions see the
// report the one before them saw.
func (rl *rankLoad) report(seq uint64, at time.Time, peers float64) {
	if seq != rl.pend.seq {
		rl.pend.Report(seq, monoNanos(at), peers)
	}
}

// change adds delta to the router's own load on e and on its rank, and
// tells the fleet (which counts load per engine). Call it under mu.
func (r *Router) change(e *engine.Engine, rank uint16, delta syncring.Load) (*rankLoad, *engineLoad) {
	l, rl := r.rankOf(e, rank)
	l.Load = addLoad(l.Load, delta)
	rl.Load = addLoad(rl.Load, delta)
	r.broadcast(e, delta)
	return rl, l
}

func addLoad(l, delta syncring.Load) syncring.Load {
	return syncring.Load{PrefillTokens: l.PrefillTokens + delta.PrefillTokens,
		DecodeTokens: l.DecodeTokens + delta.DecodeTokens, Requests: l.Requests + delta.Requests}
}

// peerRankLoad is the other replicas' load on one rank of e. The ring sums
// load per engine, not per rank, so a multi-rank engine's peer load is
// shared evenly among its ranks: the ranks' own LOAD reports are what
// tells them apart (PendingPrefill counts only the peers' growth since a
// report).
func (r *Router) peerRankLoad(e *engine.Engine) syncring.Load {
	p := r.PeerLoad(e)
	if n := int64(e.Ranks()); n > 1 {
		p = syncring.Load{PrefillTokens: p.PrefillTokens / n, DecodeTokens: p.DecodeTokens / n, Requests: p.Requests / n}
	}
	return p
}

// RankInflight returns a copy of the router's own load on one rank of e.
func (r *Router) RankInflight(e *engine.Engine, rank uint16) syncring.Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, rl := r.rankOf(e, rank)
	return rl.Load
}

// WireRank is the dp_rank the decision's GENERATE carries: the chosen rank
// of an engine with several, wire.AnyRank for one with one (its only rank,
// and the GENERATE such an engine has always received).
func (d *Decision) WireRank() uint16 {
	if d.Engine.Ranks() <= 1 {
		return wire.AnyRank
	}
	return d.Rank
}
