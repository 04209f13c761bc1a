package vllm

import "github.com/prometheus/client_golang/prometheus"

// SubscriberCollectors are the metrics of the subscribers' connections,
// read at scrape time (Collectors has the batches': received, replayed,
// gaps): dials after a lost connection, publisher restarts detected, the
// times a rank's blocks were forgotten because batches were lost for
// good, and the subscribers connected now.
func SubscriberCollectors(subs []*Subscriber) []prometheus.Collector {
	sum := subscriberSum(subs)
	return []prometheus.Collector{
		counter("subscriber_reconnects_total", "KV event subscriptions re-established after a lost connection.",
			sum(func(s *Subscriber) uint64 { return s.Reconnects.Load() })),
		counter("publisher_restarts_total", "KV event publisher restarts detected (the sequence started again).",
			sum(func(s *Subscriber) uint64 { return s.Restarts.Load() })),
		counter("event_losses_total", "Times batches were lost for good and routers told to forget a rank's blocks.",
			sum(func(s *Subscriber) uint64 { return s.Losses.Load() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_subscribers_connected", Help: "KV event subscribers connected to their publisher now."},
			func() float64 {
				n := 0
				for _, s := range subs {
					if s.Connected.Load() {
						n++
					}
				}
				return float64(n)
			}),
	}
}
