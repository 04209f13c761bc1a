package vllm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
)

// EngineMetrics is what the bridge reads of an engine's Prometheus
// /metrics, per data-parallel rank (vLLM's "engine" label, SGLang's
// "dp_rank").
type EngineMetrics struct {
	Running, Waiting float64
	KVUsage          float64 // 0..1 of the GPU KV cache
	GPUBlocks        uint64  // from vllm:cache_config_info, 0 if absent
	// GPUTokens is SGLang's KV pool in tokens (sglang:max_total_num_tokens),
	// 0 if absent; Loads sizes the GPU tier from it in pages.
	GPUTokens uint64
	// OffloadGiB is vLLM's KV offloading buffer (cache_config_info's
	// kv_offloading_size, --kv-offloading-size: GiB of CPU memory, summed
	// over TP ranks), 0 when offloading is off; OffloadBackend is its
	// kv_offloading_backend, "native" or "lmcache".
	OffloadGiB     float64
	OffloadBackend string
	// LMCacheCPUBytes and LMCacheDiskBytes are LMCache's lmcache:local_cache_usage
	// and lmcache:local_storage_usage gauges (bytes in its CPU and local
	// disk backends), which LMCache exports on vLLM's /metrics; HasLMCache
	// says they were there.
	LMCacheCPUBytes, LMCacheDiskBytes float64
	HasLMCache                        bool
	// MaxLoRAs is vLLM's --max-loras as its vllm:lora_requests_info
	// gauge says (label max_lora; set from the first step on, when the
	// engine serves adapters), 0 if absent.
	MaxLoRAs int
}

// ScrapeMetrics reads url (an engine's /metrics) into per-rank metrics.
// It understands vLLM's names old and new (gpu_cache_usage_perc became
// kv_cache_usage_perc) and SGLang's num_running_reqs / num_queue_reqs /
// token_usage.
func ScrapeMetrics(ctx context.Context, c *http.Client, url string) (map[int]*EngineMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("vllm: %s answered %d", url, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, 32<<20))
}

// SGLang's scheduler gauges (sgl-project/sglang
// python/sglang/srt/observability/scheduler_metrics_mixin.py and
// metrics_collector.py at 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed;
// managers/scheduler_metrics_mixin.py at 01bb3c807f7e62c19a31de7548837505488c2b64
// before moe_ep_rank) carry model_name, engine_type, tp_rank, pp_rank,
// moe_ep_rank, dp_rank when the server has data-parallel ranks, and the
// --extra-metric-labels. Each scheduler process exports its own series:
// by default only attention-TP rank 0 of each DP rank does, with
// --enable-metrics-for-all-schedulers every TP rank does, and under DP
// attention a DP rank's first TP rank is not 0. So a rank's value comes
// from its lowest tp_rank, of pipeline stage 0, whatever order the series
// come in. The priority label is the tokenizer's (per-request histograms
// and counters), on no gauge read here.

// seriesOf is where a sample's value belongs: its data-parallel rank and the
// TP rank that exported it; ok is false for a series to ignore.
func seriesOf(labels map[string]string) (rank, tp int, ok bool) {
	if pp := labels["pp_rank"]; pp != "" && pp != "0" {
		return 0, 0, false
	}
	r := labels["engine"]
	if r == "" {
		r = labels["dp_rank"]
	}
	rank, _ = strconv.Atoi(r)
	tp, _ = strconv.Atoi(labels["tp_rank"])
	return rank, tp, rank >= 0 && tp >= 0
}

// metric fields, for the TP rank each value came from.
const (
	fieldRunning = iota
	fieldWaiting
	fieldUsage
	fieldTokens
	fields
)

func parseMetrics(r io.Reader) (map[int]*EngineMetrics, error) {
	out := map[int]*EngineMetrics{}
	from := map[int]*[fields]int{} // per rank and field: the TP rank its value came from, -1 for none
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := bridgeutil.SplitSample(line)
		if !ok {
			continue
		}
		rank, tp, ok := seriesOf(labels)
		if !ok {
			continue
		}
		m := out[rank]
		if m == nil {
			m = &EngineMetrics{}
			out[rank] = m
			from[rank] = &[fields]int{-1, -1, -1, -1}
		}
		set := func(f int, dst *float64) {
			if src := &from[rank][f]; *src < 0 || tp <= *src { // a later line of the same TP rank wins
				*src, *dst = tp, value
			}
		}
		switch name {
		case "vllm:num_requests_running", "sglang:num_running_reqs":
			set(fieldRunning, &m.Running)
		case "vllm:num_requests_waiting", "sglang:num_queue_reqs":
			set(fieldWaiting, &m.Waiting)
		case "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage":
			set(fieldUsage, &m.KVUsage)
		case "sglang:max_total_num_tokens":
			v := float64(m.GPUTokens)
			set(fieldTokens, &v)
			if v > 0 && v < 1<<53 { // NaN, negative or absurd: unknown
				m.GPUTokens = uint64(v)
			}
		case "vllm:cache_config_info":
			m.GPUBlocks, _ = strconv.ParseUint(labels["num_gpu_blocks"], 10, 64)
			// metrics_info() writes every CacheConfig field with str():
			// "None" when offloading is off (vllm/config/cache.py at
			// 002f10e0cfa1373a19a0d2756598a34b700d20e5).
			if g, err := strconv.ParseFloat(labels["kv_offloading_size"], 64); err == nil && g > 0 && g < 1<<40 {
				m.OffloadGiB, m.OffloadBackend = g, labels["kv_offloading_backend"]
			}
		case "vllm:lora_requests_info":
			// PrometheusStatLogger (vllm/v1/metrics/loggers.py at
			// 005a810bc40faa25b8870fbc8559c3462581eee3): no engine label,
			// max_lora is lora_config.max_loras.
			if n, err := strconv.Atoi(labels["max_lora"]); err == nil && n > 0 && n <= 0xffff {
				m.MaxLoRAs = n
			}
		case "lmcache:local_cache_usage", "lmcache:local_storage_usage":
			// LMCache's PrometheusLogger (LMCache/LMCache lmcache/observability.py
			// at 0353be824aebefb9fd4fbdca022746adbf252d3b): bytes, one series
			// per worker (multiprocess mode "sum"), no engine label; the
			// workers' series add up.
			if value >= 0 && value < 1<<62 {
				m.HasLMCache = true
				if name == "lmcache:local_cache_usage" {
					m.LMCacheCPUBytes += value
				} else {
					m.LMCacheDiskBytes += value
				}
			}
		}
	}
	return out, sc.Err()
}

// Loads turns scraped metrics into LOAD reports for ranks 0..n-1, the GPU
// tier sized in blocks of blockSize tokens as the engine says it
// (vLLM's num_gpu_blocks, SGLang's pool in tokens over its page size, the
// bridge's block size), or by capacity (blocks) when it does not.
func Loads(m map[int]*EngineMetrics, n int, capacity uint64, blockSize int) []wire.Load {
	now := time.Now().UnixNano()
	out := make([]wire.Load, n)
	for r := range n {
		out[r] = wire.Load{DPRank: uint16(r), TimestampNano: now}
		em := m[r]
		if em == nil {
			continue
		}
		total := capacity
		switch {
		case em.GPUBlocks > 0:
			total = em.GPUBlocks
		case em.GPUTokens > 0 && blockSize > 0:
			total = em.GPUTokens / uint64(blockSize)
		}
		out[r].Running, out[r].Waiting = bridgeutil.Count(em.Running), bridgeutil.Count(em.Waiting)
		var used uint64 // NaN, zero or negative usage: empty
		switch u := em.KVUsage; {
		case u >= 1:
			used = total
		case u > 0:
			used = min(uint64(u*float64(total)), total) // the float may round past total
		}
		out[r].Tiers = []wire.TierUsage{{Tier: wire.TierGPU, Used: used, Total: total}}
	}
	return out
}
