package cluster

import (
	"fmt"
	"math"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// reservation is a request's load as its router sees it.
type reservation struct {
	router, engine int
	prefill        int64 // uncached prompt tokens
	decode         int64 // KV tokens, once the first token is out
	arrival        time.Duration
	firstAt        time.Duration
	lastToken      time.Duration
	gaps           []time.Duration
	cached, prompt int
	first          bool
	tag            uint64 // route.PendingPrefill's
	core           int    // the core it runs on, once delivered
}

type routerState struct {
	own    []syncring.Load // per engine: the load of its own requests
	peer   []syncring.Load // per engine: the others', as of SyncDelay ago
	loads  []wire.Load     // last LOAD per engine as received
	seqs   []uint64        // number of that LOAD
	loadAt []time.Duration // when it arrived
	pend   []route.PendingPrefill
	rr     int
	approx *kvstore.Index
	aslots []kvstore.Slot
	// adapters are the engines' LoRA residency as this router knows it
	// (Config.LoRASlots > 0 only).
	adapters []engine.AdapterView
}

// reserve changes a router's own load on an engine now, and the others'
// view of it after SyncDelay.
func (s *Sim) reserve(router, eng int, delta syncring.Load) {
	r := s.routers[router]
	r.own[eng] = addLoad(r.own[eng], delta)
	if len(s.routers) > 1 {
		s.push(&event{at: s.now + s.cfg.SyncDelay, kind: evPeer, eng: eng, peer: peerDelta{router: router, delta: delta}})
	}
}

// addLoad is l changed by delta.
func addLoad(l, delta syncring.Load) syncring.Load {
	return syncring.Load{PrefillTokens: l.PrefillTokens + delta.PrefillTokens, DecodeTokens: l.DecodeTokens + delta.DecodeTokens,
		Requests: l.Requests + delta.Requests}
}

func (s *Sim) arrive(i int) {
	req := s.reqs[i]
	router := i % len(s.routers)
	var keys *kvstore.Keys
	if req.LoRA != 0 {
		keys = &kvstore.Keys{LoRAID: req.LoRA}
	}
	hs, _ := s.hasher.Hash(nil, req.Prompt, keys)
	s.hashes[i] = hs
	if s.disaggOn() && s.arriveSplit(router, i) { // handoff.go
		return
	}
	eng, predicted := s.pick(router, i)
	if s.loraOn() {
		s.routers[router].adapters[eng].Sent(req.LoRA, s.now)
	}
	uncached := int64(len(req.Prompt) - predicted*s.cfg.Rank.BlockSize)
	r := s.routers[router]
	r.pend[eng].Report(r.seqs[eng], int64(r.loadAt[eng]), float64(s.peerOf(r, eng).PrefillTokens))
	tag := r.pend[eng].Reserve(int64(s.now), float64(uncached))
	s.res[i] = &reservation{router: router, engine: eng, prefill: uncached, arrival: s.now, prompt: len(req.Prompt), tag: tag}
	s.reserve(router, eng, syncring.Load{PrefillTokens: uncached, Requests: 1})
	s.sending[eng] += float64(uncached)
	if r.approx != nil {
		_ = r.approx.RecordApprox(r.aslots[eng], hs)
	}
	s.push(&event{at: s.now + s.cfg.NetDelay, kind: evDeliver, eng: eng, req: i})
}

// pick applies the policy; it returns the engine and the blocks it expects
// cached there.
func (s *Sim) pick(router, i int) (int, int) {
	r, req, n := s.routers[router], s.reqs[i], len(s.engines)
	switch s.cfg.Policy {
	case route.PolicyRoundRobin:
		r.rr++
		return r.rr % n, 0
	case route.PolicySession:
		key := req.Session
		if key == "" {
			key = fmt.Sprint(i)
		}
		best, bestScore := 0, uint64(0)
		for e := range n {
			if sc := xxh3.HashString(key + "\x00" + s.engines[e].id); sc > bestScore {
				best, bestScore = e, sc
			}
		}
		return best, 0
	case route.PolicyLeastLoad:
		bestLoad := math.Inf(1)
		var best []int
		for e := range n {
			l := s.loadOf(r, e)
			switch v := l.QueuedPrefill + l.ActiveDecode/16; {
			case v < bestLoad:
				best, bestLoad = append(best[:0], e), v
			case v == bestLoad:
				best = append(best, e)
			}
		}
		return best[s.rng.IntN(len(best))], 0
	case PolicyLoRAAffinity:
		return s.affinity(r, i), 0
	}
	cands := s.candidates()
	matches := make([]kvstore.Match, len(cands))
	switch {
	case s.cfg.Policy == PolicyOracle:
		for j, e := range cands {
			matches[j].Blocks[kvstore.TierGPU] = uint32(s.engines[e].core.CachedBlocks(req.Prompt, nil))
		}
	case r.approx != nil:
		r.approx.Match(s.hashes[i], pickSlots(r.aslots, cands), matches)
	default:
		s.index.Match(s.hashes[i], pickSlots(s.slots, cands), matches)
	}
	policy := s.cfg.Policy
	if policy == PolicyOracle || policy == PolicyTierBlind || policy == PolicyRankBlind || policy == PolicyLoRABlind {
		policy = route.PolicyKV
	}
	bestCost := math.Inf(1)
	costs := make([]float64, len(cands))
	for j, e := range cands {
		c := s.loadOf(r, e)
		c.Match, c.Tiers = matches[j], s.tiers
		c.AdapterMs = s.adapterCost(r, e, i)
		costs[j] = s.cfg.Weights.Cost(policy, &c, len(req.Prompt))
		bestCost = min(bestCost, costs[j])
	}
	var near []int
	for j := range cands {
		if costs[j] <= bestCost*(1+s.cfg.Weights.TieFraction) {
			near = append(near, j)
		}
	}
	best := near[s.rng.IntN(len(near))]
	return cands[best], matches[best].Depth()
}

// loadOf is the candidate as router r sees engine e, as the live router
// does: queued prefill from the engine's last report plus reservations
// since (route.PendingPrefill), decode the larger of reservations and the
// report; the oracle sees the engine's true queue.
func (s *Sim) loadOf(r *routerState, e int) route.Candidate {
	rc := &s.cfg.Rank
	c := route.Candidate{BlockSize: rc.BlockSize, MaxBatched: rc.MaxBatchedTokens, CapacityTokens: float64(rc.GPUBlocks * rc.BlockSize)}
	if s.cfg.Policy == PolicyOracle {
		l := s.engines[e].core.Load()
		c.QueuedPrefill, c.ActiveDecode = float64(l.QueuedPrefillTokens)+s.sending[e], float64(l.ActiveDecodeTokens)
		return c
	}
	peers := s.peerOf(r, e)
	peer := float64(peers.PrefillTokens)
	r.pend[e].Report(r.seqs[e], int64(r.loadAt[e]), peer)
	c.QueuedPrefill = r.pend[e].Queued(float64(r.loads[e].QueuedPrefillTokens), peer)
	c.ActiveDecode = max(float64(r.own[e].DecodeTokens+peers.DecodeTokens), float64(r.loads[e].ActiveDecodeTokens))
	return c
}

// release drops what is left of a request's reservation.
func (s *Sim) release(i int) {
	rv := s.res[i]
	if rv == nil {
		return
	}
	if rv.first {
		s.reserve(rv.router, rv.engine, syncring.Load{DecodeTokens: -rv.decode, Requests: -1})
	} else {
		s.reserve(rv.router, rv.engine, syncring.Load{PrefillTokens: -rv.prefill, Requests: -1})
		s.routers[rv.router].pend[rv.engine].Started(rv.tag)
	}
	s.res[i] = nil
}
