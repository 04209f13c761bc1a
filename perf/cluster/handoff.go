package cluster

import (
	"errors"
	"math"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// Prefill/decode disaggregation in virtual time (wire PROTOCOL.md 6.10,
// dataplane/route/disagg.go). The first Disagg.Prefill engines are
// prefill engines, the rest decode engines. A split request is
// prefilled on a prefill core (sim.Request.HandOffPrefill: it parks
// after its first token, which the client gets then), its decode side
// reaches the decode core 2 x NetDelay later (the hand-off frame to the
// router, the decode GENERATE to the engine) with the prompt and that
// token, waits there for the blocks it lacks to cross the core's KV link
// (sim.Request.HandOffDecode), and produces the rest; the router cancels
// the prefill side at the decode side's first token (it reaches the
// prefill engine NetDelay later), as the gateway does. Under kv the
// router weighs each request as route does (Weights.ShouldSplit, with
// Weights.SplitTargets and the request's output length as its
// max_tokens) unless Disagg.Always splits every one; decode engines
// serve the requests it keeps aggregated.

// Disagg is a cluster's prefill/decode split.
type Disagg struct {
	// Prefill is how many engines are prefill engines (0: none, every
	// engine role both).
	Prefill int
	// Always splits every request (no conditional choice): a fixed
	// prefill pool and decode pool, as DistServe and Splitwise serve.
	Always bool
	// Link is the decode engines' KV link (zero: sim.DefaultKVLink).
	Link sim.TierLink
}

// SLO is a latency target per request: its time to first token, and its
// time per output token after the first ((e2e - TTFT) / (output - 1)).
type SLO struct {
	TTFT, TPOT time.Duration
}

// GoodputStats is what a run measured against Config.SLO.
type GoodputStats struct {
	// Requests completed; Met, those within both targets; TTFTMet and
	// TPOTMet, within each.
	Requests, Met, TTFTMet, TPOTMet int
	// Split is how many requests were served disaggregated.
	Split int
	// Seconds is the simulated duration (the run's RequestsPerS divides
	// by it): Met / Seconds is the goodput.
	Seconds float64
}

// Goodput is requests per simulated second within both targets.
func (g *GoodputStats) Goodput() float64 {
	if g.Seconds <= 0 {
		return 0
	}
	return float64(g.Met) / g.Seconds
}

// Event kinds of hand-offs.
const (
	evDeliverPrefill eventKind = iota + 100 // a split's prefill side reaches its engine
	evDeliverDecode                         // its decode side reaches the decode engine
	evCancelPrefill                         // the router's release reaches the prefill engine
)

// split is a split request's prefill side.
type split struct {
	rv   *reservation // the prefill engine's reservation; nil once released
	core int
	key  sim.RequestKey
	// onDecode: its decode side is on the decode core.
	onDecode bool
}

func (s *Sim) disaggOn() bool { return s.cfg.Disagg.Prefill > 0 }

// isPrefill reports whether core c is a prefill engine's.
func (s *Sim) isPrefill(c int) bool { return c/s.ranks < s.cfg.Disagg.Prefill }

func (s *Sim) validateDisagg() error {
	d := s.cfg.Disagg
	switch {
	case d.Prefill == 0 && !d.Always:
		return nil
	case d.Prefill <= 0 || d.Prefill >= s.cfg.Engines:
		return errors.New("cluster: disaggregation needs at least one prefill and one decode engine")
	case s.cfg.Policy != route.PolicyKV:
		return errors.New("cluster: disaggregation is modelled under policy kv only")
	case s.ranks > 1 || s.loraOn():
		return errors.New("cluster: disaggregation with data-parallel ranks or LoRA is not modelled")
	}
	return nil
}

// rankConfig is core c's engine configuration: its role and KV link.
func (s *Sim) rankConfig(c int) sim.RankConfig {
	rc := s.cfg.Rank
	if s.disaggOn() {
		rc.Disagg = sim.Disagg{Role: wire.RoleDecode, Link: s.cfg.Disagg.Link}
		if s.isPrefill(c) {
			rc.Disagg.Role = wire.RolePrefill
		}
	}
	return rc
}

// arriveSplit decides, for request i at router, between aggregated and
// split serving, and starts a split; false: serve it aggregated (pick).
func (s *Sim) arriveSplit(router, i int) bool {
	r, req := s.routers[router], s.reqs[i]
	n := len(req.Prompt)
	w := &s.cfg.Weights
	var pre, dec []int
	for c := range s.engines {
		if s.isPrefill(c) {
			pre = append(pre, c)
		} else {
			dec = append(dec, c)
		}
	}
	cands := func(cs []int) []route.Candidate {
		matches := make([]kvstore.Match, len(cs))
		s.index.Match(s.hashes[i], pickSlots(s.slots, cs), matches)
		out := make([]route.Candidate, len(cs))
		for j, c := range cs {
			out[j] = s.loadOf(r, c)
			out[j].Match, out[j].Tiers = matches[j], s.tiers
		}
		return out
	}
	pc, dc := cands(pre), cands(dec)
	if s.cfg.Disagg.Always {
		for j := range dc {
			dc[j].CapacityTokens = 0 // a decode engine short of KV queues the hand-off: none is refused
		}
	}
	p := s.nearBest(len(pc), func(j int) float64 { return w.Cost(route.PolicyKV, &pc[j], n) })
	pcost := w.Cost(route.PolicyKV, &pc[p], n)
	d := s.nearBest(len(dc), func(j int) float64 { return w.HandoffCost(pcost, &dc[j], n) })
	if math.IsInf(w.HandoffCost(pcost, &dc[d], n), 1) {
		return false
	}
	if !s.cfg.Disagg.Always {
		a := s.nearBest(len(dc), func(j int) float64 { return w.AggregatedCost(&dc[j], n) })
		ch := route.SplitChoice{Aggregated: &dc[a], PrefillCost: pcost, Decode: &dc[d], Prompt: n, MaxTokens: s.reqs[i].Output}
		if !w.ShouldSplit(&ch) {
			return false
		}
	}
	s.startSplit(router, i, pre[p], pc[p].Match.Depth(), dec[d])
	return true
}

// nearBest is the index of least cost(j) among n, near-ties picked at
// random as the routers pick.
func (s *Sim) nearBest(n int, cost func(int) float64) int {
	costs := make([]float64, n)
	best := math.Inf(1)
	for j := range costs {
		costs[j] = cost(j)
		best = min(best, costs[j])
	}
	var near []int
	for j, c := range costs {
		if c <= best*(1+s.cfg.Weights.TieFraction) {
			near = append(near, j)
		}
	}
	if len(near) == 0 {
		return 0
	}
	return near[s.rng.IntN(len(near))]
}

// reserveOn reserves uncached prefill tokens of request i on core c for
// router (as arrive does for an aggregated request).
func (s *Sim) reserveOn(router, i, c int, uncached int64, prompt int) *reservation {
	r := s.routers[router]
	r.pend[c].Report(r.seqs[c], int64(r.loadAt[c]), float64(s.peerOf(r, c).PrefillTokens))
	tag := r.pend[c].Reserve(int64(s.now), float64(uncached))
	s.reserve(router, c, syncring.Load{PrefillTokens: uncached, Requests: 1})
	return &reservation{router: router, engine: c, prefill: uncached, arrival: s.now, prompt: prompt, tag: tag, core: c}
}

// startSplit reserves request i on prefill core p (its uncached part)
// and decode core d (the one token left), as route.Router.reservePair
// does, and sends the prefill side.
func (s *Sim) startSplit(router, i, p, predicted, d int) {
	n := len(s.reqs[i].Prompt)
	uncached := int64(n - predicted*s.cfg.Rank.BlockSize)
	prv := s.reserveOn(router, i, p, uncached, n)
	s.res[i] = s.reserveOn(router, i, d, 1, n+1)
	s.splits[i] = &split{rv: prv, core: p, key: sim.RequestKey{Stream: uint32(i)}}
	s.sending[p] += float64(uncached)
	s.goodput.Split++
	s.push(&event{at: s.now + s.cfg.NetDelay, kind: evDeliverPrefill, eng: p, req: i})
}

// handleSplit handles a hand-off's events.
func (s *Sim) handleSplit(ev *event) {
	i := ev.req
	sp := s.splits[i]
	switch ev.kind {
	case evDeliverPrefill:
		s.sending[ev.eng] -= float64(sp.rv.prefill)
		r := s.reqs[i]
		req := sim.NewRequest(sp.key, r.Prompt, sim.Params{MaxTokens: r.Output, IgnoreEOS: true}, kvstore.Keys{})
		req.HandOffPrefill(nil)
		s.add(ev.eng, i, req)
	case evDeliverDecode:
		r := s.reqs[i]
		prompt := append(append(make([]uint32, 0, len(r.Prompt)+1), r.Prompt...), ev.token)
		req := sim.NewRequest(sp.key, prompt, sim.Params{MaxTokens: r.Output - 1, IgnoreEOS: true}, kvstore.Keys{})
		req.HandOffDecode(len(r.Prompt) / s.cfg.Rank.BlockSize)
		sp.onDecode = true
		s.add(ev.eng, i, req)
	case evCancelPrefill:
		s.engines[ev.eng].core.Cancel(sp.key)
		s.splits[i] = nil
		s.kick(ev.eng) // its blocks are free: a prefill waiting for them can start
	}
}

// add queues req (request i's) on core c, failing the request if the
// core refuses it.
func (s *Sim) add(c, i int, req *sim.Request) {
	if err := s.engines[c].core.Add(req); err != nil {
		s.rec.Fail(err.Error())
		s.endSplit(i)
		s.release(i)
		s.done++
		return
	}
	s.kick(c)
}

// endSplit releases request i's prefill side, if it is split and holds one.
func (s *Sim) endSplit(i int) {
	sp := s.splits[i]
	if sp == nil || sp.rv == nil {
		return
	}
	rv := sp.rv
	if rv.first {
		s.reserve(rv.router, rv.engine, syncring.Load{DecodeTokens: -rv.decode, Requests: -1})
	} else {
		s.reserve(rv.router, rv.engine, syncring.Load{PrefillTokens: -rv.prefill, Requests: -1})
		s.routers[rv.router].pend[rv.engine].Started(rv.tag)
	}
	sp.rv = nil
}

// prefillOutput handles an output of core e that is a split's prefill
// side; false: it is not one (an aggregated request, or a decode side).
func (s *Sim) prefillOutput(e int, o *sim.Output) bool {
	i := int(o.Key.Stream)
	sp := s.splits[i]
	if sp == nil || sp.core != e {
		return false
	}
	rv, prv := s.res[i], sp.rv
	if o.First {
		// The client's first token; the prefill engine keeps the KV.
		rv.firstAt, rv.lastToken, rv.cached = s.now, s.now, o.Cached
		s.routers[prv.router].pend[prv.engine].Started(prv.tag)
		s.reserve(prv.router, prv.engine, syncring.Load{PrefillTokens: -prv.prefill, DecodeTokens: int64(prv.prompt)})
		prv.first, prv.decode = true, int64(prv.prompt)
	}
	switch {
	case o.Handoff != nil:
		s.push(&event{at: s.now + 2*s.cfg.NetDelay, kind: evDeliverDecode, eng: rv.engine, req: i, token: o.Token})
	case o.Finish != wire.FinishNone: // the first token ended it: done on the prefill engine
		s.finishRequest(s.engines[e].id, rv, o.PromptTokens, o.CompletionTokens)
		s.endSplit(i)
		s.release(i)
		s.splits[i] = nil
		s.done++
	}
	return true
}

// decodeFirst handles a split's decode side producing its first token
// (the request's second): the gap since the first, the decode engine's
// reservation now decode, the prefill side released.
func (s *Sim) decodeFirst(i int, o *sim.Output) {
	rv, sp := s.res[i], s.splits[i]
	rv.gaps = append(rv.gaps, s.now-rv.lastToken)
	rv.lastToken, rv.first = s.now, true
	s.routers[rv.router].pend[rv.engine].Started(rv.tag)
	s.reserve(rv.router, rv.engine, syncring.Load{PrefillTokens: -rv.prefill, DecodeTokens: int64(rv.prompt)})
	rv.decode = int64(rv.prompt)
	s.endSplit(i)
	s.push(&event{at: s.now + s.cfg.NetDelay, kind: evCancelPrefill, eng: sp.core, req: i})
}

// finishRequest records a completed request and its SLO attainment.
func (s *Sim) finishRequest(engine string, rv *reservation, prompt, completion int) {
	ttft, e2e := rv.firstAt-rv.arrival, s.now-rv.arrival
	s.rec.OK(engine, rv.arrival, ttft, e2e, rv.gaps, prompt, rv.cached, completion)
	g := &s.goodput
	g.Requests++
	var tpot time.Duration
	if completion > 1 {
		tpot = (e2e - ttft) / time.Duration(completion-1)
	}
	ttftOK, tpotOK := s.cfg.SLO.TTFT <= 0 || ttft <= s.cfg.SLO.TTFT, s.cfg.SLO.TPOT <= 0 || tpot <= s.cfg.SLO.TPOT
	if ttftOK {
		g.TTFTMet++
	}
	if tpotOK {
		g.TPOTMet++
	}
	if ttftOK && tpotOK {
		g.Met++
	}
}
