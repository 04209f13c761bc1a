package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/wire/serve"
)

// serveAdmin runs /metrics and /debug/pprof/ on addr: the KV events the
// bridge received, replayed and could not translate, per rank.
func serveAdmin(addr string, b *vllm.Bridge, subs []*vllm.Subscriber, srv *serve.Server) (string, error) {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, v func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvgate_bridge_" + name, Help: help}, v))
	}
	sum := func(f func(s *vllm.Subscriber) uint64) func() float64 {
		return func() float64 {
			var n uint64
			for _, s := range subs {
				n += f(s)
			}
			return float64(n)
		}
	}
	counter("event_batches_total", "KV event batches received from the engine.", sum(func(s *vllm.Subscriber) uint64 { return s.Received.Load() }))
	counter("event_batches_replayed_total", "Batches fetched from the replay socket after a gap.", sum(func(s *vllm.Subscriber) uint64 { return s.Replayed.Load() }))
	counter("event_gaps_total", "Sequence gaps seen on the KV event stream.", sum(func(s *vllm.Subscriber) uint64 { return s.Gaps.Load() }))
	counter("event_batches_undecodable_total", "Batches that did not decode.", sum(func(s *vllm.Subscriber) uint64 { return s.Undecodable.Load() }))
	skipped := prometheus.NewDesc("kvgate_bridge_blocks_skipped_total", "Stored or removed blocks not translated, by reason.", []string{"reason"}, nil)
	reg.MustRegister(collectorFunc{desc: skipped, collect: func(ch chan<- prometheus.Metric) {
		s := b.T.Skipped()
		for reason, n := range map[string]uint64{"unknown_parent": s.UnknownParent, "extra_keys": s.ExtraKeys, "other_group": s.OtherGroup,
			"unknown_tier": s.UnknownTier, "unknown_lora": s.UnknownLoRA, "unknown_block": s.UnknownBlock} {
			ch <- prometheus.MustNewConstMetric(skipped, prometheus.CounterValue, float64(n), reason)
		}
	}})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_blocks", Help: "Blocks the bridge knows the engine holds (all ranks)."},
		func() float64 {
			n := 0
			for r := range b.Ranks {
				n += b.T.Blocks(r)
			}
			return float64(n)
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvgate_bridge_routers", Help: "Connected routers."},
		func() float64 { return float64(srv.Routers()) }))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return ln.Addr().String(), nil
}

// collectorFunc is a one-metric collector.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
