// Package cluster is a discrete-event simulation of many engines and many
// router replicas in virtual time. Engines are the simulator's real Core
// (scheduler, paged prefix cache, timing profile); routers use the real
// kvstore index and the real cost function (route.Weights.Cost). Nothing
// sleeps: a trace of hours runs in minutes, at scales one machine cannot
// host as processes.
package cluster

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/perf/workload"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// PolicyOracle sees every engine's true cache and queue at once: the upper
// bound a router could reach.
const PolicyOracle route.Policy = "oracle"

// Config describes a simulated cluster.
type Config struct {
	Engines, Routers int
	Policy           route.Policy
	Weights          route.Weights
	Rank             sim.RankConfig
	// SyncDelay is how late a router learns what the others reserved
	// (their ring all-reduce), and engines' KV events and LOAD reports.
	SyncDelay time.Duration
	// NetDelay is the router-to-engine latency.
	NetDelay time.Duration
	// LoadPeriod is how often engines report LOAD.
	LoadPeriod time.Duration
	Seed       uint64
}

// eventKind is what an event of the simulation does.
type eventKind uint8

// Event kinds.
const (
	evArrival  eventKind = iota // a request reaches its router
	evDeliver                   // a request reaches its engine
	evStepDone                  // an engine's step ends
	evIndex                     // an engine's KV events reach the routers
	evLoad                      // an engine reports LOAD
	evPeer                      // a LOAD report or a reservation reaches the other routers
)

var eventKindNames = [...]string{"arrival", "deliver", "step-done", "index", "load", "peer"}

// String returns the kind's name, for debugging a run.
func (k eventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("event_%d", uint8(k))
}

type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	eng  int
	req  int
	res  sim.StepResult
	evs  []kvstore.Event
	load wire.Load
	peer peerDelta
}

// peerDelta is a change of one router's load on an engine, reaching the
// other routers (router -1: a LOAD report, reaching every router).
type peerDelta struct {
	router int
	delta  syncring.Load
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any     { old := *q; e := old[len(old)-1]; *q = old[:len(old)-1]; return e }

type engineState struct {
	core     *sim.Core
	stepping bool
	id       string
}

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
}

// Sim is one run.
type Sim struct {
	cfg     Config
	q       queue
	seq     uint64
	now     time.Duration
	engines []*engineState
	routers []*routerState
	index   *kvstore.Index // every router hears every engine alike: one index serves all
	slots   []kvstore.Slot
	hasher  *kvstore.Hasher
	reqs    []workload.Request
	hashes  [][]uint64
	res     []*reservation
	rec     *loadgen.Recorder
	sending []float64 // per engine: prefill tokens routed to it and still on the wire
	rng     *rand.Rand
	done    int
}

// Run simulates wl on the cluster and returns the measurements (latencies
// in simulated time).
func Run(cfg Config, wl *workload.Workload, progress io.Writer) (*loadgen.Result, error) {
	s := &Sim{cfg: cfg, reqs: wl.Requests, rec: loadgen.NewRecorder(), rng: rand.New(rand.NewPCG(cfg.Seed, 11)),
		index: kvstore.New(kvstore.Options{ApproxTTL: time.Hour})}
	var err error
	if s.hasher, err = kvstore.NewHasher(kvstore.HashConfig{BlockSize: cfg.Rank.BlockSize, Seed: cfg.Rank.HashSeed, Model: cfg.Rank.Model}); err != nil {
		return nil, err
	}
	for i := range cfg.Engines {
		core, err := sim.NewCore(cfg.Rank)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("engine-%d", i)
		slot, err := s.index.AddEngine(kvstore.EngineConfig{ID: id, Capacity: [kvstore.NumTiers]uint64{uint64(cfg.Rank.GPUBlocks)}})
		if err != nil {
			return nil, err
		}
		s.engines = append(s.engines, &engineState{core: core, id: id})
		s.slots = append(s.slots, slot[0])
	}
	for range cfg.Routers {
		r := &routerState{own: make([]syncring.Load, cfg.Engines), peer: make([]syncring.Load, cfg.Engines), loads: make([]wire.Load, cfg.Engines),
			seqs: make([]uint64, cfg.Engines), loadAt: make([]time.Duration, cfg.Engines),
			pend: make([]route.PendingPrefill, cfg.Engines),
			rr:   s.rng.IntN(cfg.Engines)} // replicas start their rotation at different engines
		for i := range r.pend {
			// A reservation is in a report made after its GENERATE arrived
			// (NetDelay), which reaches the router SyncDelay later.
			r.pend[i].Delay = int64(cfg.SyncDelay + cfg.NetDelay)
		}
		if cfg.Policy == route.PolicyApproxPrefix {
			r.approx = kvstore.New(kvstore.Options{ApproxTTL: time.Hour})
			for i := range cfg.Engines {
				sl, _ := r.approx.AddEngine(kvstore.EngineConfig{ID: fmt.Sprint(i), Capacity: [kvstore.NumTiers]uint64{uint64(cfg.Rank.GPUBlocks)}})
				r.aslots = append(r.aslots, sl[0])
			}
		}
		s.routers = append(s.routers, r)
	}
	s.sending = make([]float64, cfg.Engines)
	s.hashes = make([][]uint64, len(s.reqs))
	s.res = make([]*reservation, len(s.reqs))
	for i, r := range s.reqs {
		s.push(&event{at: r.At, kind: evArrival, req: i})
	}
	if cfg.LoadPeriod > 0 && len(s.reqs) > 0 {
		for e := range s.engines {
			s.push(&event{at: cfg.LoadPeriod, kind: evLoad, eng: e})
		}
	}
	start := time.Now()
	lastReport := start
	for s.q.Len() > 0 {
		ev := heap.Pop(&s.q).(*event)
		s.now = ev.at
		s.handle(ev)
		if progress != nil && time.Since(lastReport) > 5*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(progress, "  %6.0fs wall  %v simulated  %d/%d done\n", time.Since(start).Seconds(), s.now.Round(time.Second), s.done, len(s.reqs))
		}
	}
	res := s.rec.Finish(s.now, wl.Spec)
	// Finish divides by the elapsed time it is given: simulated here.
	ids := make([]string, len(s.engines))
	for i, e := range s.engines {
		ids[i] = e.id
	}
	res.CountEngines(ids)
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

func (s *Sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.q, e)
}

func (s *Sim) handle(ev *event) {
	switch ev.kind {
	case evArrival:
		s.arrive(ev.req)
	case evDeliver:
		s.sending[ev.eng] -= float64(s.res[ev.req].prefill)
		r := s.reqs[ev.req]
		req := sim.NewRequest(sim.RequestKey{Stream: uint32(ev.req)}, r.Prompt, sim.Params{MaxTokens: r.Output, IgnoreEOS: true}, kvstore.Keys{})
		if err := s.engines[ev.eng].core.Add(req); err != nil {
			s.rec.Fail(err.Error())
			s.release(ev.req)
			s.done++
			return
		}
		s.kick(ev.eng)
	case evStepDone:
		s.stepDone(ev.eng, ev.res)
	case evIndex:
		_ = s.index.Apply(s.slots[ev.eng], ev.evs)
	case evLoad:
		l := s.engines[ev.eng].core.Load()
		s.push(&event{at: s.now + s.cfg.SyncDelay, kind: evPeer, eng: ev.eng, load: l, peer: peerDelta{router: -1}})
		if s.done < len(s.reqs) {
			s.push(&event{at: s.now + s.cfg.LoadPeriod, kind: evLoad, eng: ev.eng})
		}
	case evPeer:
		if ev.peer.router < 0 { // a LOAD report reaching every router
			for _, r := range s.routers {
				r.loads[ev.eng] = ev.load
				r.seqs[ev.eng]++
				r.loadAt[ev.eng] = s.now
			}
			return
		}
		for i, r := range s.routers {
			if i != ev.peer.router {
				r.peer[ev.eng] = addLoad(r.peer[ev.eng], ev.peer.delta)
			}
		}
	}
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
	hs, _ := s.hasher.Hash(nil, req.Prompt, nil)
	s.hashes[i] = hs
	eng, predicted := s.pick(router, i)
	uncached := int64(len(req.Prompt) - predicted*s.cfg.Rank.BlockSize)
	r := s.routers[router]
	r.pend[eng].Report(r.seqs[eng], int64(r.loadAt[eng]), float64(r.peer[eng].PrefillTokens))
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
	}
	matches := make([]kvstore.Match, n)
	switch {
	case s.cfg.Policy == PolicyOracle:
		for e := range n {
			matches[e].Blocks[kvstore.TierGPU] = uint32(s.engines[e].core.CachedBlocks(req.Prompt, nil))
		}
	case r.approx != nil:
		r.approx.Match(s.hashes[i], r.aslots, matches)
	default:
		s.index.Match(s.hashes[i], s.slots, matches)
	}
	policy := s.cfg.Policy
	if policy == PolicyOracle {
		policy = route.PolicyKV
	}
	best, bestCost := 0, math.Inf(1)
	costs := make([]float64, n)
	for e := range n {
		c := s.loadOf(r, e)
		c.Match = matches[e]
		costs[e] = s.cfg.Weights.Cost(policy, &c, len(req.Prompt))
		if costs[e] < bestCost {
			best, bestCost = e, costs[e]
		}
	}
	var near []int
	for e := range n {
		if costs[e] <= bestCost*(1+s.cfg.Weights.TieFraction) {
			near = append(near, e)
		}
	}
	best = near[s.rng.IntN(len(near))]
	return best, matches[best].Depth()
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
	peer := float64(r.peer[e].PrefillTokens)
	r.pend[e].Report(r.seqs[e], int64(r.loadAt[e]), peer)
	c.QueuedPrefill = r.pend[e].Queued(float64(r.loads[e].QueuedPrefillTokens), peer)
	c.ActiveDecode = max(float64(r.own[e].DecodeTokens+r.peer[e].DecodeTokens), float64(r.loads[e].ActiveDecodeTokens))
	return c
}

// kick starts a step on an idle engine with work.
func (s *Sim) kick(e int) {
	es := s.engines[e]
	if es.stepping || es.core.Idle() {
		return
	}
	res := es.core.Step()
	es.stepping = true
	s.push(&event{at: s.now + max(res.Duration, time.Microsecond), kind: evStepDone, eng: e, res: res})
}

func (s *Sim) stepDone(e int, res sim.StepResult) {
	s.engines[e].stepping = false
	if len(res.Events) > 0 {
		s.push(&event{at: s.now + s.cfg.SyncDelay, kind: evIndex, eng: e, evs: res.Events})
	}
	for _, o := range res.Outputs {
		i := int(o.Key.Stream)
		rv := s.res[i]
		if o.First {
			rv.first, rv.cached, rv.firstAt, rv.lastToken = true, o.Cached, s.now, s.now
			s.routers[rv.router].pend[rv.engine].Started(rv.tag)
			s.reserve(rv.router, rv.engine, syncring.Load{PrefillTokens: -rv.prefill, DecodeTokens: int64(rv.prompt)})
			rv.decode = int64(rv.prompt)
		} else if o.HasToken {
			rv.gaps = append(rv.gaps, s.now-rv.lastToken)
			rv.lastToken = s.now
		}
		if o.HasToken {
			s.reserve(rv.router, rv.engine, syncring.Load{DecodeTokens: 1})
			rv.decode++
		}
		if o.Finish != wire.FinishNone {
			s.rec.OK(s.engines[e].id, rv.arrival, rv.firstAt-rv.arrival, s.now-rv.arrival, rv.gaps, o.PromptTokens, rv.cached, o.CompletionTokens)
			s.release(i)
			s.done++
		}
	}
	s.kick(e)
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
