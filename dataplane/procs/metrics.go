package procs

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds kvgate_gomaxprocs (the runtime's Ps now) to reg, and,
// with a governor, kvgate_spare_procs (1 while its spare Ps are in use)
// and kvgate_gomaxprocs_changes_total.
func Register(reg prometheus.Registerer, g *Governor) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvgate_gomaxprocs",
		Help: "The Go runtime's Ps (GOMAXPROCS) now.",
	}, func() float64 { return float64(runtime.GOMAXPROCS(0)) }))
	if g == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvgate_spare_procs",
		Help: "1 while the procs governor runs a P per event loop and poller besides one per CPU (--adaptive-procs).",
	}, func() float64 {
		if g.Spare() {
			return 1
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "kvgate_gomaxprocs_changes_total",
		Help: "Changes of GOMAXPROCS by the procs governor (--adaptive-procs).",
	}, func() float64 { return float64(g.Changes()) }))
}
