package llamacpp

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the bridge's Prometheus metrics, read at scrape time: the
// blocks it believes the server holds, the token ids llama.cpp's streams
// left out by what became of them, the failed /slots polls, and the
// routers connected (routers reports them).
func Collectors(b *Bridge, routers func() int) []prometheus.Collector {
	ids := func(f func(IDCounts) uint64) func() float64 { return func() float64 { return float64(f(b.IDs())) } }
	idCounter := func(outcome string, f func(IDCounts) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_bridge_token_ids_left_out_total",
			Help:        "Token ids llama.cpp's stream left out (a token ending inside a UTF-8 sequence), by outcome.",
			ConstLabels: prometheus.Labels{"outcome": outcome}}, ids(f))
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_blocks", Help: "Blocks the bridge believes the engine holds."},
			func() float64 { return float64(b.Blocks()) }),
		idCounter("recovered", func(c IDCounts) uint64 { return c.Recovered }),
		idCounter("guessed", func(c IDCounts) uint64 { return c.Guessed }),
		idCounter("lost", func(c IDCounts) uint64 { return c.Lost }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_bridge_slot_polls_failed_total", Help: "Polls of llama.cpp's /slots that failed."},
			func() float64 { return float64(b.PollsFailed()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_routers", Help: "Connected routers."},
			func() float64 { return float64(routers()) }),
	}
}
