package engine

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// AdapterView is one (engine, rank)'s LoRA residency as a router knows it:
// what its ADAPTERS frames said, the loads this router started there by
// sending it a request for an adapter it did not hold, and when a request
// for each resident adapter last went there. Times are the caller's clock
// (a monotonic offset: time.Since a start in kvgate, virtual time in
// perf/cluster). Safe for concurrent use: one mutex, held for a few map
// operations.
type AdapterView struct {
	mu       sync.Mutex
	known    bool // an ADAPTERS frame came: the engine reports residency
	slots    int
	resident map[uint32]time.Duration // adapter -> last sent here (or loaded)
	loading  map[uint32]time.Duration // adapter -> when a request started its load
	// loadNs is the mean of the reported load times (0: none yet), loads
	// and evictions count the reports.
	loadNs           float64
	loads, evictions uint64
	loadsOf          map[uint32]uint64 // per adapter
}

// Apply takes an ADAPTERS frame of this rank in, at now.
func (v *AdapterView) Apply(m *wire.Adapters, now time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.resident == nil {
		v.resident, v.loading = map[uint32]time.Duration{}, map[uint32]time.Duration{}
	}
	v.known, v.slots = true, int(m.Slots)
	switch m.Change {
	case wire.AdaptersResident:
		old := v.resident
		v.resident = make(map[uint32]time.Duration, len(m.LoRAs))
		for _, l := range m.LoRAs {
			v.resident[l.ID] = old[l.ID]
			delete(v.loading, l.ID)
		}
	case wire.AdaptersLoaded:
		for _, l := range m.LoRAs {
			if _, ok := v.resident[l.ID]; !ok {
				v.resident[l.ID] = now
			}
			delete(v.loading, l.ID)
			v.loads++
			if v.loadsOf == nil {
				v.loadsOf = map[uint32]uint64{}
			}
			v.loadsOf[l.ID]++
			// A running mean: every load counts alike.
			v.loadNs += (float64(m.LoadNanos) - v.loadNs) / float64(v.loads)
		}
	case wire.AdaptersUnloaded, wire.AdaptersEvicted:
		for _, l := range m.LoRAs {
			delete(v.resident, l.ID)
			if m.Change == wire.AdaptersEvicted {
				v.evictions++
			}
		}
	}
}

// Sent records that a request for adapter id goes to this rank at now: it
// is resident from now on, or its load has started.
func (v *AdapterView) Sent(id uint32, now time.Duration) {
	if id == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.known {
		return
	}
	if _, ok := v.resident[id]; ok {
		v.resident[id] = now
	} else if _, ok := v.loading[id]; !ok {
		v.loading[id] = now
	}
}

// CostMs is what a router adds, in ms, to this rank's time-to-first-token
// estimate for a request with adapter id at now: 0 when it is resident (or
// the rank reports no residency); the rest of a load under way; else one
// load (the mean reported load time, defaultLoadMs before any) plus, when
// every slot is taken, one more load times exp(-idle/heat) for the
// adapter it would evict, idle since a request for it last went there.
func (v *AdapterView) CostMs(id uint32, now time.Duration, defaultLoadMs float64, heat time.Duration) float64 {
	if id == 0 {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.known {
		return 0
	}
	if _, ok := v.resident[id]; ok {
		return 0
	}
	load := defaultLoadMs
	if v.loads > 0 {
		load = v.loadNs / 1e6
	}
	if at, ok := v.loading[id]; ok {
		if left := load - float64(now-at)/1e6; left > -10*load {
			return max(left, 0)
		}
		delete(v.loading, id) // its report never came: count a load again
	}
	cost := load
	if len(v.resident)+len(v.loading) >= max(v.slots, 1) {
		coldest := time.Duration(math.MaxInt64)
		for _, last := range v.resident {
			coldest = min(coldest, last)
		}
		if coldest != math.MaxInt64 && heat > 0 {
			cost += load * math.Exp(-float64(now-coldest)/float64(heat))
		}
	}
	return cost
}

// Resident reports whether id is resident on the rank (the base model,
// 0, always is).
func (v *AdapterView) Resident(id uint32) bool {
	if id == 0 {
		return true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.resident[id]
	return ok
}

// Held reports whether id is resident on the rank or being loaded for a
// request this router sent (the base model, 0, always is).
func (v *AdapterView) Held(id uint32) bool {
	if id == 0 {
		return true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.resident[id]
	_, loading := v.loading[id]
	return ok || loading
}

// AdapterStats is an AdapterView's state, for metrics.
type AdapterStats struct {
	Known            bool
	Slots            int
	Resident         []uint32
	Loads, Evictions uint64
	// MeanLoad is the mean reported load time (0: none reported).
	MeanLoad time.Duration
	// LoadsOf counts the reported loads per adapter.
	LoadsOf map[uint32]uint64
}

// Stats returns the view's state; Resident is in no order.
func (v *AdapterView) Stats() AdapterStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := AdapterStats{Known: v.known, Slots: v.slots, Loads: v.loads, Evictions: v.evictions, MeanLoad: time.Duration(v.loadNs)}
	for id := range v.resident {
		s.Resident = append(s.Resident, id)
	}
	if len(v.loadsOf) > 0 {
		s.LoadsOf = make(map[uint32]uint64, len(v.loadsOf))
		for id, n := range v.loadsOf {
			s.LoadsOf[id] = n
		}
	}
	return s
}

// adapterEpoch starts AdapterNow's clock.
var adapterEpoch = time.Now()

// AdapterNow is the clock of the pool's AdapterViews: monotonic time since
// the process started.
func AdapterNow() time.Duration { return time.Since(adapterEpoch) }

// rankAdapters keeps an engine's AdapterViews, one per rank that sent
// ADAPTERS. The read loop grows it (its only writer, copying on growth);
// routing reads it without a lock, and each view locks itself.
type rankAdapters struct {
	views atomic.Pointer[[]*AdapterView]
}

// apply files an ADAPTERS frame under its rank.
func (a *rankAdapters) apply(m *wire.Adapters, now time.Duration) {
	rank := int(m.DPRank)
	vs := a.views.Load()
	if vs == nil || rank >= len(*vs) {
		grown := make([]*AdapterView, rank+1)
		if vs != nil {
			copy(grown, *vs)
		}
		for i := range grown {
			if grown[i] == nil {
				grown[i] = &AdapterView{}
			}
		}
		a.views.Store(&grown)
		vs = &grown
	}
	(*vs)[rank].Apply(m, now)
}

// reset forgets every rank's residency (a new connection reports it anew).
func (a *rankAdapters) reset() { a.views.Store(nil) }

// Adapters returns the LoRA residency of one rank of the engine, or nil
// when the rank has sent no ADAPTERS frame on this connection (an engine
// without wire.FeatureAdapters: its adapters are fixed, all resident).
func (e *Engine) Adapters(rank uint16) *AdapterView {
	vs := e.adapters.views.Load()
	if vs == nil || int(rank) >= len(*vs) {
		return nil
	}
	return (*vs)[rank]
}
