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
// /metrics, per data-parallel rank (vLLM's "engine" label).
type EngineMetrics struct {
	Running, Waiting float64
	KVUsage          float64 // 0..1 of the GPU KV cache
	GPUBlocks        uint64  // from vllm:cache_config_info, 0 if absent
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

func parseMetrics(r io.Reader) (map[int]*EngineMetrics, error) {
	out := map[int]*EngineMetrics{}
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
		rank, _ := strconv.Atoi(labels["engine"])
		m := out[rank]
		if m == nil {
			m = &EngineMetrics{}
			out[rank] = m
		}
		switch name {
		case "vllm:num_requests_running", "sglang:num_running_reqs":
			m.Running = value
		case "vllm:num_requests_waiting", "sglang:num_queue_reqs":
			m.Waiting = value
		case "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage":
			m.KVUsage = value
		case "vllm:cache_config_info":
			m.GPUBlocks, _ = strconv.ParseUint(labels["num_gpu_blocks"], 10, 64)
		}
	}
	return out, sc.Err()
}

// Loads turns scraped metrics into LOAD reports for ranks 0..n-1, the GPU
// tier sized by capacity (blocks) when the engine does not say.
func Loads(m map[int]*EngineMetrics, n int, capacity uint64) []wire.Load {
	now := time.Now().UnixNano()
	out := make([]wire.Load, n)
	for r := range n {
		out[r] = wire.Load{DPRank: uint16(r), TimestampNano: now}
		em := m[r]
		if em == nil {
			continue
		}
		total := capacity
		if em.GPUBlocks > 0 {
			total = em.GPUBlocks
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
