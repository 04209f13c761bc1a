package admin

import (
	"context"
	"sync"
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// Sample is the fleet as this replica saw it at one moment: the status
// page's chart plots these.
type Sample struct {
	// At is the time of the sample, Unix milliseconds.
	At int64 `json:"t"`
	// Ready counts the engines taking requests.
	Ready int `json:"ready"`
	// Requests, PrefillTokens and DecodeTokens are this replica's load in
	// flight, summed over the engines.
	Requests      int64 `json:"requests"`
	PrefillTokens int64 `json:"prefill_tokens"`
	DecodeTokens  int64 `json:"decode_tokens"`
	// GPUBlocks are the GPU-tier blocks the index holds, over all engines.
	GPUBlocks uint64 `json:"gpu_blocks"`
	// PromptTokens and CachedTokens are the fleet's totals since start
	// (TokenCounts): two samples' differences are the hit rate between
	// them.
	PromptTokens float64 `json:"prompt_tokens"`
	CachedTokens float64 `json:"cached_tokens"`
}

// History is a ring buffer of the last samples: its memory is fixed at
// NewHistory, whatever the uptime. Safe for concurrent use.
type History struct {
	mu    sync.Mutex // guards buf, next, taken
	buf   []Sample
	next  int    // where the next sample goes
	taken uint64 // samples added since start
}

// NewHistory keeps the last n samples (at least one).
func NewHistory(n int) *History { return &History{buf: make([]Sample, max(n, 1))} }

// Add records s, dropping the oldest sample once full.
func (h *History) Add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf[h.next] = s
	h.next = (h.next + 1) % len(h.buf)
	h.taken++
}

// Samples returns the kept samples, oldest first, and how many were ever
// added (a reader tells a moving history from a stuck one by it).
func (h *History) Samples() ([]Sample, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken < uint64(len(h.buf)) {
		return append([]Sample(nil), h.buf[:h.next]...), h.taken
	}
	return append(append([]Sample(nil), h.buf[h.next:]...), h.buf[:h.next]...), h.taken
}

// Record samples src every interval until ctx ends, the first at once.
func (h *History) Record(ctx context.Context, every time.Duration, src StatusSource) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.Add(sampleOf(src.State(), TokenCounts(src.Metrics), time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sampleOf(st *State, tokens map[string]Tokens, at time.Time) Sample {
	s := Sample{At: at.UnixMilli()}
	for _, t := range tokens {
		s.PromptTokens += t.Prompt
		s.CachedTokens += t.Cached
	}
	for _, e := range st.Engines {
		if e.State == "ready" {
			s.Ready++
		}
		s.Requests += e.Inflight.Requests
		s.PrefillTokens += e.Inflight.PrefillTokens
		s.DecodeTokens += e.Inflight.DecodeTokens
	}
	for _, ie := range st.Index.Engines {
		s.GPUBlocks += ie.Blocks[kvstore.TierGPU]
	}
	return s
}
