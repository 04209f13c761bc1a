package cluster

import (
	"math"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

// PolicyLoRABlind is kv with a router that does not know LoRA residency
// (engines from before ADAPTERS): the prompt's cache counts, a load does
// not, although the engine still loads and evicts adapters.
const PolicyLoRABlind route.Policy = "kv-lora-blind"

// PolicyLoRAAffinity is the adapter-affinity baseline of S-LoRA and dLoRA
// style schedulers: a request goes to the least loaded engine where its
// adapter is resident (or loading), else to the least loaded engine, which
// loads it; the KV cache is not looked at.
const PolicyLoRAAffinity route.Policy = "lora-affinity"

// SimOnlyPolicy reports whether p is one of the simulation's own
// policies (oracle and the blind baselines), which route.ParsePolicy does
// not know.
func SimOnlyPolicy(p route.Policy) bool {
	switch p {
	case PolicyOracle, PolicyTierBlind, PolicyRankBlind, PolicyLoRABlind, PolicyLoRAAffinity:
		return true
	}
	return false
}

// AdapterStats is what a run with LoRA slots measured, filled in by Run
// when Config.AdapterStats points to one.
type AdapterStats struct {
	// Requests ran with an adapter; Hits found it resident and loaded
	// when they reached their engine.
	Requests, Hits int
	// Loads and Evictions are summed over the engines.
	Loads, Evictions int
	// Minutes is the simulated run's length.
	Minutes float64
}

// HitRate is the fraction of adapter requests that found their adapter
// ready.
func (a *AdapterStats) HitRate() float64 { return float64(a.Hits) / math.Max(float64(a.Requests), 1) }

// LoadsPerMinute is the adapter loads of all engines per simulated minute.
func (a *AdapterStats) LoadsPerMinute() float64 { return float64(a.Loads) / math.Max(a.Minutes, 1e-9) }

// loraEngine is a core's adapter slots and the requests waiting for one.
type loraEngine struct {
	slots   *sim.LoRASlots
	waiting []int
}

// loraOn reports whether the run models adapter slots.
func (s *Sim) loraOn() bool { return s.cfg.LoRASlots > 0 }

// admitAdapter runs when request i reaches core c: it holds the request's
// adapter and reports whether the request may start now; otherwise it
// starts when its adapter's load completes (evAdapterReady) or, with every
// slot held, when a request ends (releaseAdapter).
func (s *Sim) admitAdapter(c, i int) bool {
	id := s.reqs[i].LoRA
	if !s.loraOn() || id == 0 {
		return true
	}
	le := &s.lora[c]
	ready, loaded, evicted, err := le.slots.Acquire(id, s.now)
	if err != nil {
		le.waiting = append(le.waiting, i)
		return false
	}
	s.adapterStats.Requests++
	if evicted != 0 {
		s.announce(c, s.now, wire.AdaptersEvicted, 0, evicted)
	}
	if loaded {
		s.announce(c, ready, wire.AdaptersLoaded, uint64(le.slots.LoadTime()), id)
	}
	if ready <= s.now {
		s.adapterStats.Hits++
		return true
	}
	s.push(&event{at: ready, kind: evAdapterReady, eng: c, req: i})
	return false
}

// announce sends core c's ADAPTERS frame, made at the engine at `at`, to
// the routers (SyncDelay later).
func (s *Sim) announce(c int, at time.Duration, change wire.AdapterChange, loadNs uint64, id uint32) {
	m := &wire.Adapters{Change: change, Slots: uint16(s.cfg.LoRASlots), LoadNanos: loadNs, LoRAs: []wire.LoRA{{ID: id}}}
	s.push(&event{at: at + s.cfg.SyncDelay, kind: evAdapters, eng: c, adapters: m})
}

// releaseAdapter ends request i's hold on its adapter at core c and lets
// in the requests that waited for a slot.
func (s *Sim) releaseAdapter(c, i int) {
	id := s.reqs[i].LoRA
	if !s.loraOn() || id == 0 {
		return
	}
	le := &s.lora[c]
	le.slots.Release(id)
	waiting := le.waiting
	le.waiting = nil
	for _, w := range waiting {
		if s.admitAdapter(c, w) {
			s.startOn(c, w)
		}
	}
}

// adapterCost is what the kv policy adds for request i on engine e as
// router r sees it.
func (s *Sim) adapterCost(r *routerState, e, i int) float64 {
	if !s.loraOn() || s.cfg.Policy == PolicyLoRABlind {
		return 0
	}
	return s.cfg.AdapterWeights.AdapterMs(&r.adapters[e], s.reqs[i].LoRA, s.now)
}

// affinity is PolicyLoRAAffinity's pick for request i by router r.
func (s *Sim) affinity(r *routerState, i int) int {
	id := s.reqs[i].LoRA
	best, bestLoad, bestHeld := 0, math.Inf(1), false
	for e := range s.engines {
		l := s.loadOf(r, e)
		load := l.QueuedPrefill + l.ActiveDecode/16
		held := r.adapters[e].Held(id)
		if held && !bestHeld || held == bestHeld && load < bestLoad {
			best, bestLoad, bestHeld = e, load, held
		}
	}
	return best
}

// initLoRA makes the cores' slots and the routers' views.
func (s *Sim) initLoRA() {
	if !s.loraOn() {
		return
	}
	if s.cfg.AdapterWeights == (route.AdapterWeights{}) {
		s.cfg.AdapterWeights = route.DefaultAdapterWeights()
	}
	load := s.cfg.LoRALoadTime
	if load <= 0 {
		load = sim.DefaultLoRALoadTime
	}
	s.lora = make([]loraEngine, len(s.engines))
	for c := range s.lora {
		s.lora[c].slots = sim.NewLoRASlots(s.cfg.LoRASlots, load)
	}
	empty := &wire.Adapters{Change: wire.AdaptersResident, Slots: uint16(s.cfg.LoRASlots)}
	for _, r := range s.routers {
		r.adapters = make([]engine.AdapterView, len(s.engines))
		for e := range r.adapters {
			r.adapters[e].Apply(empty, 0) // each engine's first ADAPTERS frame
		}
	}
}

// finishLoRA fills Config.AdapterStats.
func (s *Sim) finishLoRA() {
	if s.cfg.AdapterStats == nil {
		return
	}
	st := s.adapterStats
	for _, le := range s.lora {
		st.Loads += le.slots.Loads
		st.Evictions += le.slots.Evictions
	}
	st.Minutes = s.now.Minutes()
	*s.cfg.AdapterStats = st
}
