// Package route decides which engine serves a request: it hashes the prompt
// per engine hash scheme, matches it against the KV index, scores each
// candidate by an estimate of its time to first token, and reserves the
// chosen engine's load. A candidate is an (engine, data-parallel rank)
// pair: each rank has its own cache, LOAD reports and reservations, and the
// chosen rank travels in the GENERATE (Decision.WireRank; ranks.go). The choice and the reservation are two critical
// sections, not one: decisions made at the same moment may score the same
// load, and picking at random among near-ties is what spreads them. Which
// lock guards what, and what routing reads without one: dataplane/LOCKS.md.
package route

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// Request is what the router needs of a request.
type Request struct {
	Model   string
	Tokens  []uint32
	Keys    kvstore.Keys
	Session string // session key for the session policy
	// Needs are engine features the request requires (structured output).
	Needs wire.Feature
	// Exclude are engines this request already failed on before its first
	// token: a re-route tries the others first, and these only when no
	// other engine is left.
	Exclude []*engine.Engine
	// Split says the caller can serve a disaggregated decision (one with
	// Decision.Prefill, disagg.go); without it prefill engines serve nothing.
	Split bool
	// MaxTokens bounds the request's output (its max_tokens; 0: unknown):
	// the split decision's TPOT estimate spreads the KV transfer over it.
	MaxTokens int
}

// Routing errors.
var (
	// ErrNoEngine: no ready engine serves the model.
	ErrNoEngine = errors.New("route: no ready engine serves the model")
	// ErrQueueFull: every engine of the model is at MaxInflight.
	ErrQueueFull = errors.New("route: every engine's queue is full")
)

// Router routes requests over a pool.
type Router struct {
	pool     *engine.Pool
	policy   Policy
	wt       atomic.Pointer[Weights] // the weights in force (SetWeights)
	rr       atomic.Uint64
	approx   *kvstore.Index // approx-prefix: the router's own guesses, no events
	aslots   sync.Map       // *engine.Engine -> []kvstore.Slot (per rank) in approx
	mu       sync.Mutex     // guards inflight and byPos
	inflight map[*engine.Engine]*engineLoad
	byPos    []*engineLoad // inflight's views by engine place (loadOf)
	fleet    Fleet         // other replicas' load; nil when alone
	// aw weigh a LoRA adapter's load (lora.go); set before routing starts.
	aw AdapterWeights
}

// New returns a router.
func New(pool *engine.Pool, policy Policy, w Weights) *Router {
	r := &Router{pool: pool, policy: policy, inflight: make(map[*engine.Engine]*engineLoad), aw: DefaultAdapterWeights()}
	r.wt.Store(&w)
	if policy == PolicyApproxPrefix {
		r.approx = kvstore.New(kvstore.Options{})
	}
	return r
}

// Policy returns the router's policy.
func (r *Router) Policy() Policy { return r.policy }

// Route picks an engine and reserves the request's load on it.
func (r *Router) Route(req *Request) (*Decision, error) {
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	if d, ok, err := r.routeDisagg(s, req); ok { // disagg.go: only with prefill engines
		return d, err
	}
	s.cands = r.candidates(s.cands[:0], req.Model, req.Needs, req.Exclude)
	if len(s.cands) == 0 && len(req.Exclude) > 0 {
		s.cands = r.candidates(s.cands[:0], req.Model, req.Needs, nil)
	}
	if len(s.cands) == 0 {
		return nil, ErrNoEngine
	}
	cands := s.cands
	if r.weights().MaxInflight > 0 {
		s.room = r.withRoom(s.room[:0], cands)
		cands = s.room
	}
	if len(cands) == 0 {
		return nil, ErrQueueFull
	}
	var d *Decision
	var err error
	switch r.policy {
	case PolicyRoundRobin:
		c := cands[r.rr.Add(1)%uint64(len(cands))]
		d = &Decision{Engine: c.e, Rank: c.rank}
	case PolicyLeastLoad:
		d = r.leastLoad(cands)
	case PolicySession:
		d = r.session(cands, req)
	default:
		d, err = r.byCost(s, cands, req)
	}
	if err != nil {
		return nil, err
	}
	d.r, d.prompt = r, len(req.Tokens)
	prefill := d.prefill()
	_, seq, at := d.Engine.RankLoadReport(d.Rank)
	peers := r.peerRankLoad(d.Engine)
	r.mu.Lock()
	rl, _ := r.change(d.Engine, d.Rank, syncring.Load{PrefillTokens: prefill, Requests: 1})
	rl.report(seq, at, float64(peers.PrefillTokens))
	d.tag = rl.pend.Reserve(monoNanos(time.Now()), float64(prefill))
	r.mu.Unlock()
	return d, nil
}

// candidates appends to out the (engine, rank) pairs that can serve the
// request: every data-parallel rank of each engine that can.
func (r *Router) candidates(out []cand, model string, needs wire.Feature, exclude []*engine.Engine) []cand {
	for _, e := range r.pool.Engines() {
		if !e.Ready() || e.Features()&needs != needs {
			continue
		}
		if _, lora, ok := e.Resolve(model); ok && !slices.Contains(exclude, e) && takesOrdinary(e) {
			for rank := range e.Ranks() {
				out = append(out, cand{e: e, rank: uint16(rank), lora: lora})
			}
		}
	}
	return out
}

// withRoom appends to out the candidates of cands whose engine is below
// MaxInflight (which must be set).
func (r *Router) withRoom(out, cands []cand) []cand {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cands {
		if r.loadOf(c.e).Requests < int64(r.weights().MaxInflight) {
			out = append(out, c)
		}
	}
	return out
}
