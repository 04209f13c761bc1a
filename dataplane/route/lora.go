package route

import (
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// AdapterWeights tune what the kv policy adds to a candidate's estimated
// time to first token when the request's LoRA adapter is not resident there.
type AdapterWeights struct {
	// LoadMs is an adapter load's time until the engine has reported one
	// of its own (ADAPTERS LOADED's load_ns).
	LoadMs float64
	// HeatWindow is how fast an adapter goes cold: the adapter a load would
	// evict costs one more load times exp(-idle / HeatWindow), idle being
	// how long since a request for it was last sent to that engine. An
	// adapter used a moment ago will be wanted again; one idle for minutes
	// costs nothing to drop.
	HeatWindow time.Duration
	// Blind makes kv ignore residency: no adapter costs anything
	// anywhere (the adapter-blind baseline of measurements, and what
	// kvgate did before engines reported residency).
	Blind bool
}

// DefaultAdapterWeights: loads of 50 ms until measured (perf/sim's
// DefaultLoRALoadTime, the slow end of published figures), adapters cold
// after some 10 s idle.
func DefaultAdapterWeights() AdapterWeights {
	return AdapterWeights{LoadMs: 50, HeatWindow: 10 * time.Second}
}

// AdapterMs is what kv adds for a request with adapter id on a rank whose
// residency is v, at now (engine.AdapterView.CostMs under these weights).
func (w *AdapterWeights) AdapterMs(v *engine.AdapterView, id uint32, now time.Duration) float64 {
	if id == 0 || v == nil || w.Blind {
		return 0
	}
	return v.CostMs(id, now, w.LoadMs, w.HeatWindow)
}

// SetAdapterWeights replaces the weights of LoRA loads; call it before
// routing starts.
func (r *Router) SetAdapterWeights(w AdapterWeights) { r.aw = w }
