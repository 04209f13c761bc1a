package route

import (
	"math"
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// Weights tune the kv policy's time-to-first-token estimate.
type Weights struct {
	// PrefillTokensPerMs is an engine's prefill rate.
	PrefillTokensPerMs float64
	// CPUBlockCost, when not negative, overrides the transfer-time cost of
	// a CPU-tier block with a fixed fraction of recomputing it (0: free, 1:
	// as if not cached); DiskBlockCost likewise. Negative (the default): a
	// lower-tier hit costs its transfer time, from the engine's announced
	// tier costs (Candidate.Tiers) or the defaults below.
	CPUBlockCost, DiskBlockCost float64
	// CPULink, DiskLink and KVBytesPerToken stand in for what an engine
	// did not announce of its tiers (wire.TierCosts).
	CPULink, DiskLink TierLink
	KVBytesPerToken   float64
	// ApproxBlockCost discounts approximate (unconfirmed) hits.
	ApproxBlockCost float64
	// DecodeMsPerKToken adds decode pressure: ms per 1,000 active decode tokens.
	DecodeMsPerKToken float64
	// DecodeStepBaseMs and DecodeStepUtilMs model what a decode batch adds
	// to every step, prefill chunks included: base + util x (active decode
	// tokens / KV capacity). An engine busy decoding prefills slowly.
	DecodeStepBaseMs, DecodeStepUtilMs float64
	// TieFraction: engines within this fraction of the best cost are
	// near-equal and one is picked at random.
	TieFraction float64
	// MaxInflight bounds the requests this router keeps in flight on one
	// engine (0: no bound); when every engine is at it, Route fails with
	// ErrQueueFull.
	MaxInflight int
	// ReportDelay is how long an engine's LOAD report may lag a
	// reservation: a GENERATE's trip to the engine plus the report's trip
	// back. Reservations made this long before a report arrived are still
	// counted on top of it (see PendingPrefill).
	ReportDelay time.Duration
	// SplitTargets are the TTFT and TPOT targets a split decision weighs
	// (disagg_slo.go); zero: it compares times to the second token only.
	SplitTargets SplitTargets
}

// DefaultWeights fit the simulator's default profile (Dynamo's mocker
// polynomials): ~66 tokens/ms of prefill in 8k-token chunks, each step
// slowed by 5.7-34 ms while a decode batch fills the cache; lower tiers at
// their transfer time over the default links.
func DefaultWeights() Weights {
	return Weights{PrefillTokensPerMs: 66, CPUBlockCost: -1, DiskBlockCost: -1, ApproxBlockCost: 0.3,
		CPULink: DefaultCPULink, DiskLink: DefaultDiskLink, KVBytesPerToken: DefaultKVBytesPerToken,
		DecodeMsPerKToken: 0.05, DecodeStepBaseMs: 5.7, DecodeStepUtilMs: 28, TieFraction: 0.05, MaxInflight: 1024,
		ReportDelay: 2 * time.Millisecond}
}

// Candidate is what the cost of one engine for one prompt depends on. The
// live router fills it from the index and its load view; the cluster
// simulation (perf/cluster) from its own, so both score alike.
type Candidate struct {
	Match          kvstore.Match
	BlockSize      int
	QueuedPrefill  float64 // prompt tokens waiting for prefill on the engine
	ActiveDecode   float64 // KV tokens of the requests it is decoding
	MaxBatched     int     // tokens per step
	CapacityTokens float64 // GPU KV capacity in tokens
	// Tiers are what the engine's lower tiers cost (zero: the defaults of
	// Weights); only read when Match has CPU or disk blocks.
	Tiers TierCosts
	// AdapterMs is the wait for the request's LoRA adapter on the engine
	// (AdapterView.CostMs): 0 when resident or for the base model.
	AdapterMs float64
}

// Cost is the policy's score of a candidate for a prompt of n tokens (lower
// is better). kv: estimated time to first token in ms, from queued and
// uncached prefill (approximate hits at a discount) over the prefill rate,
// plus the time to load the prompt's CPU and disk blocks over the engine's
// links (the prefill they save is not in the uncached work), plus the
// decode batch every prefill chunk carries, plus the wait for the
// request's LoRA adapter when it must be loaded (Candidate.AdapterMs).
// dynamo: prefill blocks - overlap + decode blocks.
func (w *Weights) Cost(p Policy, c *Candidate, n int) float64 {
	m, bs := c.Match, float64(max(c.BlockSize, 1))
	if p == PolicyDynamo {
		return (c.QueuedPrefill+float64(n))/bs - float64(m.Depth()) + c.ActiveDecode/bs
	}
	uncached := float64(n) - bs*(float64(m.Blocks[kvstore.TierGPU])+float64(m.Approx)*(1-w.ApproxBlockCost))
	transfer := 0.0
	if lower := m.Blocks[kvstore.TierCPU] + m.Blocks[kvstore.TierDisk]; lower > 0 {
		var unloaded float64
		unloaded, transfer = w.lowerTiers(c)
		uncached -= bs * (float64(lower) - unloaded)
	}
	work := c.QueuedPrefill + max(uncached, 1)
	cost := work/w.PrefillTokensPerMs + transfer + w.DecodeMsPerKToken*c.ActiveDecode/1000 + c.AdapterMs
	if c.ActiveDecode > 0 {
		// Every chunk of MaxBatched tokens is one step carrying the decode batch.
		util := 1.0
		if c.CapacityTokens > 0 {
			util = min(c.ActiveDecode/c.CapacityTokens, 1)
		}
		cost += math.Ceil(work/float64(max(c.MaxBatched, 1))) * (w.DecodeStepBaseMs + w.DecodeStepUtilMs*util)
	}
	return cost
}

// matchBlocks is how many of a prompt's n hashed blocks to match against
// the candidates cs. An engine computes at least the prompt's last token,
// so its hit covers at most the blocks before it (vLLM's
// max_cache_hit_length is num_tokens - 1). For a hybrid engine that bound
// decides where its groups must serve (kvstore's Match), so a match that
// has one stops there; without one the whole prompt is matched, as it
// always was (a full-attention hit is a leading run: the bound only trims
// it, and the cost sees the prompt's length).
func matchBlocks(cs []cand, n, tokens, blockSize int) int {
	for _, c := range cs {
		if c.e.Hybrid() {
			if blockSize < 1 || tokens < 1 {
				return 0
			}
			return min(n, (tokens-1)/blockSize)
		}
	}
	return n
}
