package vllm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

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
		name, labels, value, ok := splitSample(line)
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

// splitSample parses `name{k="v",...} value [timestamp]`.
func splitSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	rest := line
	if i := strings.IndexAny(rest, "{ "); i > 0 {
		name, rest = rest[:i], rest[i:]
	} else {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return "", nil, 0, false
		}
		for _, kv := range splitLabels(rest[1:end]) {
			k, v, found := strings.Cut(kv, "=")
			if found {
				labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		rest = rest[end+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, v, err == nil
}

// splitLabels splits on commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
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
		out[r].Running, out[r].Waiting = count(em.Running), count(em.Waiting)
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

// count turns a scraped gauge into a request count. The engine's text is
// not trusted to be sane: Go leaves converting a NaN, negative or too
// large float to an integer to the platform (-1 reads as 4294967295 on
// amd64), so such values are clamped first.
func count(v float64) uint32 {
	switch {
	case !(v > 0):
		return 0
	case v >= math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(v)
}
