package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// loraCollector reports, at scrape time, the LoRA residency of every rank
// of the wire engines that announce it (ADAPTERS, wire.FeatureAdapters):
// its slots, which adapters are resident, the loads and evictions it
// reported, per adapter for loads, and its mean load time, the one kv's
// estimate uses. Engines without the feature have no series: their
// adapters are fixed at the handshake.
type loraCollector struct{ pool *engine.Pool }

var (
	descLoRASlots     = prometheus.NewDesc("kvgate_lora_slots", "LoRA adapter slots of an engine's rank, as its ADAPTERS frames say.", rankLabels, nil)
	descLoRAResident  = prometheus.NewDesc("kvgate_lora_resident", "1 for each LoRA adapter resident on the rank.", []string{"engine", "rank", "adapter"}, nil)
	descLoRALoads     = prometheus.NewDesc("kvgate_lora_loads_total", "LoRA adapter loads the rank reported, per adapter.", []string{"engine", "rank", "adapter"}, nil)
	descLoRAEvictions = prometheus.NewDesc("kvgate_lora_evictions_total", "LoRA adapters the rank evicted to free a slot.", rankLabels, nil)
	descLoRALoadTime  = prometheus.NewDesc("kvgate_lora_load_seconds", "Mean time of the rank's reported LoRA adapter loads.", rankLabels, nil)
)

func (c *loraCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoRASlots, descLoRAResident, descLoRALoads, descLoRAEvictions, descLoRALoadTime} {
		ch <- d
	}
}

func (c *loraCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.pool.Engines() {
		names := map[uint32]string{}
		for _, l := range e.Info().LoRAs {
			names[l.ID] = l.Name
		}
		name := func(id uint32) string {
			if n := names[id]; n != "" {
				return n
			}
			return strconv.FormatUint(uint64(id), 10)
		}
		for r := range e.Ranks() {
			v := e.Adapters(uint16(r))
			if v == nil {
				continue
			}
			st := v.Stats()
			if !st.Known {
				continue
			}
			rs := strconv.Itoa(r)
			ch <- prometheus.MustNewConstMetric(descLoRASlots, prometheus.GaugeValue, float64(st.Slots), e.Addr, rs)
			for _, id := range st.Resident {
				ch <- prometheus.MustNewConstMetric(descLoRAResident, prometheus.GaugeValue, 1, e.Addr, rs, name(id))
			}
			for id, n := range st.LoadsOf {
				ch <- prometheus.MustNewConstMetric(descLoRALoads, prometheus.CounterValue, float64(n), e.Addr, rs, name(id))
			}
			ch <- prometheus.MustNewConstMetric(descLoRAEvictions, prometheus.CounterValue, float64(st.Evictions), e.Addr, rs)
			ch <- prometheus.MustNewConstMetric(descLoRALoadTime, prometheus.GaugeValue, st.MeanLoad.Seconds(), e.Addr, rs)
		}
	}
}
