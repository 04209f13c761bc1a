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
	"math/rand/v2"
	"time"

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

// PolicyTierBlind is kv with a router that knows only the engines' GPU
// caches: their CPU and disk events never reach its index (a router, or a
// bridge, from before tiered caches), so a lower-tier hit looks like a
// miss to it, although the engine still loads the blocks.
const PolicyTierBlind route.Policy = "kv-tier-blind"

// PolicyRankBlind is kv with a router that does not route by
// data-parallel rank, as kvgate did before it did: an engine is one
// candidate, matched by rank 0's cache only, scored on whichever rank
// reported LOAD last (the ranks' reports overwrite each other), and sent
// the request for "any rank", so the engine puts it on its least busy rank
// whatever that rank holds (ranks.go).
const PolicyRankBlind route.Policy = "kv-rank-blind"

// Config describes a simulated cluster.
type Config struct {
	Engines, Routers int
	// Ranks are the data-parallel ranks of each engine (0 or 1: one), each
	// with its own Rank-sized scheduler and cache: Engines x Ranks cores.
	Ranks   int
	Policy  route.Policy
	Weights route.Weights
	Rank    sim.RankConfig
	// SyncDelay is how late a router learns what the others reserved
	// (their ring all-reduce), and engines' KV events and LOAD reports.
	SyncDelay time.Duration
	// NetDelay is the router-to-engine latency.
	NetDelay time.Duration
	// LoadPeriod is how often engines report LOAD.
	LoadPeriod time.Duration
	Seed       uint64
	// LoRASlots, when above 0, gives every engine rank that many LoRA
	// adapter slots: a request whose adapter is not resident waits for its
	// load (LoRALoadTime; 0: sim.DefaultLoRALoadTime), the least recently
	// used idle adapter evicted for it, and engines announce every change
	// as ADAPTERS frames (lora.go). AdapterWeights tune kv's estimate of a
	// load; AdapterStats, when not nil, receives what the run measured.
	LoRASlots      int
	LoRALoadTime   time.Duration
	AdapterWeights route.AdapterWeights
	AdapterStats   *AdapterStats
	// Disagg splits the engines into prefill and decode engines
	// (handoff.go). SLO are the targets Goodput, when not nil, receives
	// the attainment of.
	Disagg  Disagg
	SLO     SLO
	Goodput *GoodputStats
}

// Sim is one run.
type Sim struct {
	cfg     Config
	q       queue
	seq     uint64
	now     time.Duration
	engines []*engineState // one per rank: engine e's rank k is engines[e*ranks+k]
	ranks   int
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
	// tiers are what the engines' lower tiers cost, as a router learns it
	// from their handshake (route.Weights.TierCostsOf).
	tiers route.TierCosts
	// lora are the cores' adapter slots (LoRASlots > 0 only).
	lora         []loraEngine
	adapterStats AdapterStats
	// splits are the split requests' prefill sides (handoff.go).
	splits  []*split
	goodput GoodputStats
}

// Run simulates wl on the cluster and returns the measurements (latencies
// in simulated time).
func Run(cfg Config, wl *workload.Workload, progress io.Writer) (*loadgen.Result, error) {
	s := &Sim{cfg: cfg, reqs: wl.Requests, rec: loadgen.NewRecorder(), rng: rand.New(rand.NewPCG(cfg.Seed, 11)),
		index: kvstore.New(kvstore.Options{ApproxTTL: time.Hour}), ranks: max(cfg.Ranks, 1)}
	if err := s.validateDisagg(); err != nil {
		return nil, err
	}
	var err error
	if s.hasher, err = kvstore.NewHasher(kvstore.HashConfig{BlockSize: cfg.Rank.BlockSize, Seed: cfg.Rank.HashSeed, Model: cfg.Rank.Model}); err != nil {
		return nil, err
	}
	announced := cfg.Rank.TierCosts()
	s.tiers = cfg.Weights.TierCostsOf(&announced, cfg.Rank.BlockSize)
	for i := range cfg.Engines {
		id := fmt.Sprintf("engine-%d", i)
		slots, err := s.index.AddEngine(kvstore.EngineConfig{ID: id, Ranks: s.ranks, Capacity: [kvstore.NumTiers]uint64{uint64(cfg.Rank.GPUBlocks),
			uint64(cfg.Rank.CPUBlocks), uint64(cfg.Rank.DiskBlocks)}, Groups: cfg.Rank.IndexGroups()})
		if err != nil {
			return nil, err
		}
		for k := range s.ranks {
			core, err := sim.NewCore(s.rankConfig(len(s.engines)))
			if err != nil {
				return nil, err
			}
			rid := id
			if s.ranks > 1 {
				rid = fmt.Sprintf("%s/rank-%d", id, k)
			}
			s.engines = append(s.engines, &engineState{core: core, id: rid})
			s.slots = append(s.slots, slots[k])
		}
	}
	cores := len(s.engines)
	for range cfg.Routers {
		r := &routerState{own: make([]syncring.Load, cores), peer: make([]syncring.Load, cores), loads: make([]wire.Load, cores),
			seqs: make([]uint64, cores), loadAt: make([]time.Duration, cores),
			pend: make([]route.PendingPrefill, cores),
			rr:   s.rng.IntN(cores)} // replicas start their rotation at different engines
		for i := range r.pend {
			// A reservation is in a report made after its GENERATE arrived
			// (NetDelay), which reaches the router SyncDelay later.
			r.pend[i].Delay = int64(cfg.SyncDelay + cfg.NetDelay)
		}
		if cfg.Policy == route.PolicyApproxPrefix {
			r.approx = kvstore.New(kvstore.Options{ApproxTTL: time.Hour})
			for i := range cores {
				sl, _ := r.approx.AddEngine(kvstore.EngineConfig{ID: fmt.Sprint(i), Capacity: [kvstore.NumTiers]uint64{uint64(cfg.Rank.GPUBlocks)}})
				r.aslots = append(r.aslots, sl[0])
			}
		}
		s.routers = append(s.routers, r)
	}
	s.initLoRA()
	s.sending = make([]float64, cores)
	s.hashes = make([][]uint64, len(s.reqs))
	s.res = make([]*reservation, len(s.reqs))
	s.splits = make([]*split, len(s.reqs))
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
	s.finishLoRA()
	if cfg.Goodput != nil {
		s.goodput.Seconds = s.now.Seconds()
		*cfg.Goodput = s.goodput
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
