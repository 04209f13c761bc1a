package vllm

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the bridge's Prometheus metrics, read at scrape time: the
// KV event batches its subscribers received, replayed and could not
// decode, the blocks it could not translate by reason, the blocks it knows
// the engine holds, and the routers connected (routers reports them).
func Collectors(b *Bridge, subs []*Subscriber, routers func() int) []prometheus.Collector {
	sum := subscriberSum(subs)
	return append([]prometheus.Collector{
		counter("event_batches_total", "KV event batches received from the engine.", sum(func(s *Subscriber) uint64 { return s.Received.Load() })),
		counter("event_batches_replayed_total", "Batches fetched from the replay socket after a gap.", sum(func(s *Subscriber) uint64 { return s.Replayed.Load() })),
		counter("event_gaps_total", "Sequence gaps seen on the KV event stream.", sum(func(s *Subscriber) uint64 { return s.Gaps.Load() })),
		counter("event_batches_undecodable_total", "Batches that did not decode.", sum(func(s *Subscriber) uint64 { return s.Undecodable.Load() })),
		skippedCollector{b},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_blocks", Help: "Blocks the bridge knows the engine holds (all ranks)."},
			func() float64 {
				n := 0
				for r := range b.Ranks {
					n += b.T.Blocks(r)
				}
				return float64(n)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_routers", Help: "Connected routers."},
			func() float64 { return float64(routers()) }),
	}, residencyCollectors(b.Residency)...)
}

// residencyCollectors are the adapter residency's metrics (none without
// one): loads, their time, evictions, failures, what is resident and who
// waits for a slot.
func residencyCollectors(r *Residency) []prometheus.Collector {
	if r == nil {
		return nil
	}
	stat := func(f func(s ResidencyStats) float64) func() float64 { return func() float64 { return f(r.Stats()) } }
	return []prometheus.Collector{
		counter("lora_loads_total", "LoRA adapters loaded on the engine for requests.", stat(func(s ResidencyStats) float64 { return float64(s.Loads) })),
		counter("lora_load_seconds_total", "Time the engine took for those loads.", stat(func(s ResidencyStats) float64 { return s.LoadTime.Seconds() })),
		counter("lora_evictions_total", "Adapters unloaded to free a slot.", stat(func(s ResidencyStats) float64 { return float64(s.Evictions) })),
		counter("lora_load_failures_total", "Adapter loads the engine refused or that failed.", stat(func(s ResidencyStats) float64 { return float64(s.Failures) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_lora_resident", Help: "Adapters of the bridge's resident on the engine."},
			stat(func(s ResidencyStats) float64 { return float64(s.Resident) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_lora_in_use", Help: "Requests holding a resident adapter."},
			stat(func(s ResidencyStats) float64 { return float64(s.InUse) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_lora_waiting", Help: "Requests waiting for an adapter slot (every resident adapter in use)."},
			stat(func(s ResidencyStats) float64 { return float64(s.Waiting) })),
	}
}

var descSkipped = prometheus.NewDesc("kvgate_bridge_blocks_skipped_total", "Stored or removed blocks not translated, by reason.", []string{"reason"}, nil)

// skippedCollector reports the translator's skipped blocks by reason.
type skippedCollector struct{ b *Bridge }

func (c skippedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descSkipped }

func (c skippedCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.T.Skipped()
	for reason, n := range s.Reasons() {
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.CounterValue, float64(n), reason)
	}
}

// subscriberSum returns a function that sums a counter over subs, for
// counterFunc.
func subscriberSum(subs []*Subscriber) func(f func(s *Subscriber) uint64) func() float64 {
	return func(f func(s *Subscriber) uint64) func() float64 {
		return func() float64 {
			var n uint64
			for _, s := range subs {
				n += f(s)
			}
			return float64(n)
		}
	}
}

// counter is a kvgate_bridge_ counter read from v at scrape time.
func counter(name, help string, v func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_bridge_" + name, Help: help}, v)
}
