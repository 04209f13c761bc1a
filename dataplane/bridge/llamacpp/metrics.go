package llamacpp

import (
	"bufio"
	"io"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
)

// Metrics is what the bridge reads of llama-server's GET /metrics
// (server_task_result_metrics::to_metrics, Prometheus text, names
// prefixed "llamacpp:", no labels but the per-position draft counter):
//
//	# TYPE llamacpp:requests_processing gauge
//	llamacpp:requests_processing 1
//	# TYPE llamacpp:requests_deferred gauge
//	llamacpp:requests_deferred 0
//	llamacpp:prompt_tokens_total 1620
//	llamacpp:prompt_tokens_cached_total 440
type Metrics struct {
	// Processing and Deferred are the requests in a slot and those queued
	// for one.
	Processing, Deferred float64
	// PromptTokens and PromptTokensCached count prompt tokens computed and
	// reused from the cache since the server started.
	PromptTokens, PromptTokensCached float64
	// Found says any llamacpp: sample was there.
	Found bool
}

// ParseMetrics reads a /metrics exposition.
func ParseMetrics(r io.Reader) (Metrics, error) {
	var m Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, value, ok := bridgeutil.SplitSample(line)
		if !ok {
			continue
		}
		switch name {
		case "llamacpp:requests_processing":
			m.Processing = value
		case "llamacpp:requests_deferred":
			m.Deferred = value
		case "llamacpp:prompt_tokens_total":
			m.PromptTokens = value
		case "llamacpp:prompt_tokens_cached_total":
			m.PromptTokensCached = value
		default:
			continue
		}
		m.Found = true
	}
	return m, sc.Err()
}

// LoadOf is the server's LOAD report: the slots processing as running
// (the metrics' count when /slots did not answer), the deferred requests
// as waiting, the tokens of the busy slots as decoding, and the slots'
// tokens against their contexts, in blocks of blockSize, as the GPU tier.
// capacity (blocks) stands for the total when no slot says its context.
func LoadOf(slots []Slot, m Metrics, blockSize int, capacity uint64) wire.Load {
	l := wire.Load{TimestampNano: time.Now().UnixNano(), Running: bridgeutil.Count(m.Processing), Waiting: bridgeutil.Count(m.Deferred)}
	var used, total uint64
	if slots != nil {
		l.Running = 0
	}
	for i := range slots {
		s := &slots[i]
		if s.IsProcessing {
			l.Running++
			l.ActiveDecodeTokens += uint64(s.NPromptTokens)
		}
		used += uint64(s.NPromptTokens+blockSize-1) / uint64(blockSize)
		total += uint64(s.NCtx) / uint64(blockSize)
	}
	if total == 0 {
		total = capacity
	}
	l.Tiers = []wire.TierUsage{{Tier: wire.TierGPU, Used: min(used, total), Total: total}}
	return l
}
