package route

import (
	"sync/atomic"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
)

// Decision is a routing decision and its reservation. Call FirstToken when
// the first token arrives and Done when the request ends (either once).
type Decision struct {
	// Prefill, for a request served disaggregated (disagg.go), is its
	// prefill side: Engine is then the decode engine, and Prefill's
	// FirstToken comes with the hand-off, its Done with the release (or
	// this Decision's Done, which releases both). Nil: aggregated.
	Prefill *Decision
	Engine  *engine.Engine
	// Rank is the engine's data-parallel rank chosen (0 for an engine with
	// one); its GENERATE carries WireRank.
	Rank uint16
	// Match is what the index said the engine holds of the prompt.
	Match kvstore.Match
	// PredictedCached is Match in tokens.
	PredictedCached int
	// guessed is the part of PredictedCached that is approximate entries of
	// the shared index (kv, for an engine that has sent no KV event): the
	// cost weighs them at ApproxBlockCost, but the reservation counts them
	// as prefill, the work the engine has if the guess is wrong, until its
	// LOAD report says otherwise.
	guessed     int
	prompt      int
	tag         uint64 // PendingPrefill's tag of the reservation; guarded by r.mu
	generated   int64  // guarded by r.mu
	r           *Router
	first, done atomic.Bool
}

// prefill is the prompt tokens the decision reserves as prefill.
func (d *Decision) prefill() int64 { return int64(d.prompt - d.PredictedCached + d.guessed) }

// FirstToken moves the request's reservation from prefill to decode.
func (d *Decision) FirstToken() {
	if d.first.Swap(true) || d.done.Load() {
		return
	}
	prefill := d.prefill()
	d.r.mu.Lock()
	rl, _ := d.r.change(d.Engine, d.Rank, syncring.Load{PrefillTokens: -prefill, DecodeTokens: int64(d.prompt)})
	rl.pend.Started(d.tag)
	d.r.mu.Unlock()
}

// Generated grows the request's decode load by n new tokens: each one's
// KV stays in the engine's batch until the request ends.
func (d *Decision) Generated(n int) {
	if n <= 0 || d.done.Load() {
		return
	}
	d.r.mu.Lock()
	l, rl := d.r.rankOf(d.Engine, d.Rank)
	l.DecodeTokens += int64(n)
	rl.DecodeTokens += int64(n)
	d.generated += int64(n)
	d.r.mu.Unlock()
}

// Done releases the request's reservation.
func (d *Decision) Done() {
	if d.Prefill != nil {
		d.Prefill.Done()
	}
	if d.done.Swap(true) {
		return
	}
	d.r.mu.Lock()
	delta := syncring.Load{Requests: -1}
	first := d.first.Load()
	if first {
		delta.DecodeTokens = -(int64(d.prompt) + d.generated)
	} else {
		delta.PrefillTokens = -d.prefill()
	}
	rl, _ := d.r.change(d.Engine, d.Rank, delta)
	if !first {
		rl.pend.Started(d.tag)
	}
	d.r.mu.Unlock()
}
