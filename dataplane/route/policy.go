package route

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
)

// Policy names a routing policy.
type Policy string

// Policies.
const (
	PolicyKV           Policy = "kv"
	PolicyRoundRobin   Policy = "round-robin"
	PolicyLeastLoad    Policy = "least-load"
	PolicySession      Policy = "session"
	PolicyApproxPrefix Policy = "approx-prefix"
	// PolicyDynamo is a baseline: NVIDIA Dynamo's published KV router cost,
	// prefill blocks (queued plus the prompt's uncached ones) plus active
	// decode blocks, minimised.
	PolicyDynamo Policy = "dynamo"
)

// ParsePolicy validates a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyKV, PolicyRoundRobin, PolicyLeastLoad, PolicySession, PolicyApproxPrefix, PolicyDynamo:
		return p, nil
	}
	return "", fmt.Errorf("route: unknown policy %q (kv, round-robin, least-load, session, approx-prefix, dynamo)", s)
}

func (r *Router) leastLoad(cands []cand) *Decision {
	bestLoad := math.Inf(1)
	var best []cand
	for _, c := range cands {
		switch _, _, n := r.queued(c.e, c.rank); {
		case n < bestLoad:
			best, bestLoad = append(best[:0], c), n
		case n == bestLoad:
			best = append(best, c) // ties are broken at random below
		}
	}
	c := best[rand.IntN(len(best))]
	return &Decision{Engine: c.e, Rank: c.rank}
}

// session picks by rendezvous hashing of the session key over the
// candidates (an engine's address, and its rank when it has several), so a
// session stays on its rank while the engine set is stable.
func (r *Router) session(cands []cand, req *Request) *Decision {
	key := req.Session
	if key == "" {
		c := cands[r.rr.Add(1)%uint64(len(cands))]
		return &Decision{Engine: c.e, Rank: c.rank}
	}
	var best cand
	var bestScore uint64
	for _, c := range cands {
		id := key + "\x00" + c.e.Addr
		if c.e.Ranks() > 1 {
			id += "\x00" + strconv.Itoa(int(c.rank))
		}
		if s := xxh3.HashString(id); best.e == nil || s > bestScore {
			best, bestScore = c, s
		}
	}
	return &Decision{Engine: best.e, Rank: best.rank}
}

// byCost is the kv (and approx-prefix, dynamo) policy: the least estimated
// time to first token, near-ties broken at random so replicas do not herd
// (Weights.PickNearTie). The prompt is hashed once per hash scheme and
// matched against all candidates of that scheme in one index call. Under
// kv, an engine that has sent no KV event yet is known only by what it was
// sent: the prompt's blocks are recorded for the chosen engine as
// approximate entries of the shared index, matched at ApproxBlockCost,
// bounded by the index's TTL and the engine's capacity, and dropped the
// moment the engine's first event arrives (kvstore.Index.RecordApprox,
// which costs one atomic load for an engine that has sent events).
func (r *Router) byCost(s *scratch, cands []cand, req *Request) (*Decision, error) {
	w := r.weights() // one set of weights for the whole decision
	groups := s.group(cands)
	s.matches, s.costs = s.matches[:0], s.costs[:0]
	for gi := range groups {
		g := &groups[gi]
		keys := req.Keys
		keys.LoRAID = g.sc.lora
		var err error
		if g.hs, err = g.sc.h.Hash(g.hs, req.Tokens, &keys); err != nil {
			return nil, fmt.Errorf("route: hashing prompt: %w", err)
		}
		bs := g.sc.h.BlockSize()
		matches := r.matchAll(s, g.es, g.hs[:matchBlocks(g.es, len(g.hs), len(req.Tokens), bs)])
		s.matches = append(s.matches, matches...)
		s.queues = slices.Grow(s.queues[:0], len(g.es))[:len(g.es)]
		r.queuedAll(s.queues, g.es)
		for i, cd := range g.es {
			e := cd.e
			maxBatched, capacity := e.Shape()
			c := Candidate{Match: matches[i], BlockSize: bs, QueuedPrefill: s.queues[i].prefill, ActiveDecode: s.queues[i].decode,
				MaxBatched: maxBatched, CapacityTokens: capacity}
			if m := &matches[i]; m.Blocks[kvstore.TierCPU]+m.Blocks[kvstore.TierDisk] > 0 {
				// Only a lower-tier hit needs the engine's tier costs: the
				// handshake's copy is not paid for the common case.
				info := e.Info()
				c.Tiers = w.TierCostsOf(&info.TierCosts, bs)
			}
			if g.sc.lora != 0 && r.policy == PolicyKV {
				c.AdapterMs = r.aw.AdapterMs(e.Adapters(cd.rank), g.sc.lora, engine.AdapterNow())
			}
			s.costs = append(s.costs, w.Cost(r.policy, &c, len(req.Tokens)))
		}
	}
	if len(s.costs) == 0 {
		return nil, ErrNoEngine
	}
	k := w.PickNearTie(s.costs)
	g, pick := pickOf(groups, k)
	match, bs := s.matches[k], g.sc.h.BlockSize()
	d := &Decision{Engine: pick.e, Rank: pick.rank, Match: match, PredictedCached: bs * match.Depth()}
	if pick.lora != 0 {
		if v := pick.e.Adapters(pick.rank); v != nil {
			v.Sent(pick.lora, engine.AdapterNow()) // resident from now, or loading for this request
		}
	}
	switch {
	case r.approx != nil:
		r.recordApprox(pick, g.hs)
	case r.policy == PolicyKV:
		d.guessed = bs * int(match.Approx)
		if slot, ok := pick.e.RankSlot(pick.rank); ok {
			_ = r.pool.Index().RecordApprox(slot, g.hs)
		}
	}
	return d, nil
}

// pickOf returns the group of the k-th candidate scored (byCost scores
// the groups' candidates in order) and the candidate.
func pickOf(groups []group, k int) (*group, cand) {
	for gi := range groups {
		if g := &groups[gi]; k < len(g.es) {
			return g, g.es[k]
		}
		k -= len(groups[gi].es)
	}
	panic("route: pick beyond the candidates scored")
}

// matchAll matches hs against every candidate of cs at once (the router's
// own approximate index for approx-prefix, the shared index otherwise):
// each (engine, rank) by its rank's slot. The result is in s, valid until
// the next call.
func (r *Router) matchAll(s *scratch, cs []cand, hs []uint64) []kvstore.Match {
	s.out = slices.Grow(s.out[:0], len(cs))[:len(cs)]
	if len(hs) == 0 && r.approx == nil {
		// A prompt shorter than a block: every engine holds none of it
		// (what Index.Match answers, after its lock and its walk).
		clear(s.out)
		return s.out
	}
	s.slots = slices.Grow(s.slots[:0], len(cs))[:len(cs)]
	index := r.pool.Index()
	for i, c := range cs {
		ok := false
		if r.approx != nil {
			s.slots[i], ok = r.approxSlot(c)
		} else {
			s.slots[i], ok = c.e.RankSlot(c.rank)
		}
		if !ok {
			s.slots[i] = kvstore.MaxSlots // matches nothing
		}
	}
	if r.approx != nil {
		index = r.approx
	}
	index.Match(hs, s.slots, s.out)
	return s.out
}

// approxSlot is c's slot in the router's own approximate index, made (one
// per rank of the engine) the first time the engine is a candidate.
func (r *Router) approxSlot(c cand) (kvstore.Slot, bool) {
	v, ok := r.aslots.Load(c.e)
	if !ok {
		info := c.e.Info()
		slots, err := r.approx.AddEngine(kvstore.EngineConfig{ID: c.e.Addr, Ranks: c.e.Ranks(),
			Capacity: [kvstore.NumTiers]uint64{info.Capacity(0)}})
		if err != nil {
			return 0, false
		}
		v, _ = r.aslots.LoadOrStore(c.e, slots)
	}
	slots := v.([]kvstore.Slot)
	if int(c.rank) >= len(slots) {
		return 0, false
	}
	return slots[c.rank], true
}

func (r *Router) recordApprox(c cand, hs []uint64) {
	if s, ok := r.approxSlot(c); ok {
		_ = r.approx.RecordApprox(s, hs)
	}
}
