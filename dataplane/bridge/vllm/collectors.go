package vllm

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the bridge's Prometheus metrics, read at scrape time: the
// KV event batches its subscribers received, replayed and could not
// decode, the blocks it could not translate by reason, the blocks it knows
// the engine holds, and the routers connected (routers reports them).
func Collectors(b *Bridge, subs []*Subscriber, routers func() int) []prometheus.Collector {
	sum := subscriberSum(subs)
	return []prometheus.Collector{
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
