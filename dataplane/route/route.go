// Package route decides which engine serves a request: it hashes the prompt
// per engine hash scheme, matches it against the KV index, scores each
// candidate by an estimate of its time to first token, and reserves the
// chosen engine's load. The choice and the reservation are two critical
// sections, not one: decisions made at the same moment may score the same
// load, and picking at random among near-ties is what spreads them. Which
// lock guards what, and what routing reads without one: dataplane/LOCKS.md.
package route

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// Policy names a routing policy.
type Policy string

// Policies.
const (
	PolicyKV           Policy = "kv"
	PolicyRoundRobin   Policy = "round-robin"
	PolicyLeastLoad    Policy = "least-load"
	PolicySession      Policy = "session"
	PolicyApproxPrefix Policy = "approx-prefix"
	// PolicyDynamo is a baseline: NVIDIA Dynamo's published KV router cost,
	// prefill blocks (queued plus the prompt's uncached ones) plus active
	// decode blocks, minimised.
	PolicyDynamo Policy = "dynamo"
)

// ParsePolicy validates a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyKV, PolicyRoundRobin, PolicyLeastLoad, PolicySession, PolicyApproxPrefix, PolicyDynamo:
		return p, nil
	}
	return "", fmt.Errorf("route: unknown policy %q (kv, round-robin, least-load, session, approx-prefix, dynamo)", s)
}

// Weights tune the kv policy's time-to-first-token estimate.
type Weights struct {
	// PrefillTokensPerMs is an engine's prefill rate.
	PrefillTokensPerMs float64
	// CPUBlockCost is the cost of a CPU-tier block relative to recomputing
	// it (0: free, 1: as if not cached); DiskBlockCost likewise.
	CPUBlockCost, DiskBlockCost float64
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
}

// DefaultWeights fit the simulator's default profile (Dynamo's mocker
// polynomials): ~66 tokens/ms of prefill in 8k-token chunks, each step
// slowed by 5.7-34 ms while a decode batch fills the cache; CPU blocks at a
// fifth of recomputing.
func DefaultWeights() Weights {
	return Weights{PrefillTokensPerMs: 66, CPUBlockCost: 0.2, DiskBlockCost: 0.5, ApproxBlockCost: 0.3,
		DecodeMsPerKToken: 0.05, DecodeStepBaseMs: 5.7, DecodeStepUtilMs: 28, TieFraction: 0.05, MaxInflight: 1024,
		ReportDelay: 2 * time.Millisecond}
}

// Request is what the router needs of a request.
type Request struct {
	Model   string
	Tokens  []uint32
	Keys    kvstore.Keys
	Session string // session key for the session policy
	// Needs are engine features the request requires (structured output).
	Needs wire.Feature
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
	w        Weights
	rr       atomic.Uint64
	approx   *kvstore.Index // approx-prefix: the router's own guesses, no events
	aslots   sync.Map       // *engine.Engine -> kvstore.Slot in approx
	mu       sync.Mutex     // guards inflight
	inflight map[*engine.Engine]*engineLoad
	fleet    Fleet                  // other replicas' load; nil when alone
	pos      map[*engine.Engine]int // engine -> index in the pool (and the fleet's vectors)
}

// Fleet is the rest of the fleet of kvgate replicas (a syncring.Ring): their
// load on every engine, indexed like the pool's engines, and the broadcast
// of this replica's load changes (reservations, first tokens, releases).
type Fleet interface {
	PeerLoad() []syncring.Load
	Reserve(engine int, delta syncring.Load)
}

// engineLoad is a router's view of one engine: its own load there (the
// work it has sent and not yet seen finish) and the queued-prefill estimate
// built on the engine's reports.
type engineLoad struct {
	syncring.Load
	pend PendingPrefill
}

// New returns a router.
func New(pool *engine.Pool, policy Policy, w Weights) *Router {
	r := &Router{pool: pool, policy: policy, w: w, inflight: make(map[*engine.Engine]*engineLoad), pos: map[*engine.Engine]int{}}
	for i, e := range pool.Engines() {
		r.pos[e] = i
	}
	if policy == PolicyApproxPrefix {
		r.approx = kvstore.New(kvstore.Options{})
	}
	return r
}

// Policy returns the router's policy.
func (r *Router) Policy() Policy { return r.policy }

// Decision is a routing decision and its reservation. Call FirstToken when
// the first token arrives and Done when the request ends (either once).
type Decision struct {
	Engine *engine.Engine
	// Match is what the index said the engine holds of the prompt.
	Match kvstore.Match
	// PredictedCached is Match in tokens.
	PredictedCached int
	prompt          int
	tag             uint64 // PendingPrefill's tag of the reservation; guarded by r.mu
	generated       int64  // guarded by r.mu
	r               *Router
	first, done     atomic.Bool
}

// Route picks an engine and reserves the request's load on it.
func (r *Router) Route(req *Request) (*Decision, error) {
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	s.cands = r.candidates(s.cands[:0], req.Model, req.Needs)
	if len(s.cands) == 0 {
		return nil, ErrNoEngine
	}
	cands := s.cands
	if r.w.MaxInflight > 0 {
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
		d = &Decision{Engine: cands[r.rr.Add(1)%uint64(len(cands))]}
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
	prefill := int64(len(req.Tokens) - d.PredictedCached)
	_, seq, at := d.Engine.LoadReport()
	peers := r.PeerLoad(d.Engine)
	r.mu.Lock()
	l := r.loadOf(d.Engine)
	l.PrefillTokens += prefill
	l.Requests++
	l.pend.Report(seq, monoNanos(at), float64(peers.PrefillTokens))
	d.tag = l.pend.Reserve(monoNanos(time.Now()), float64(prefill))
	r.broadcast(d.Engine, syncring.Load{PrefillTokens: prefill, Requests: 1})
	r.mu.Unlock()
	return d, nil
}

// broadcast tells the fleet of a change of this router's load on e. Call it
// under mu, with the change: ReadLoad's mark must see both or neither.
func (r *Router) broadcast(e *engine.Engine, delta syncring.Load) {
	if r.fleet != nil {
		r.fleet.Reserve(r.pos[e], delta)
	}
}

// SetFleet makes routing count the other replicas' load. Call it before
// routing starts.
func (r *Router) SetFleet(f Fleet) { r.fleet = f }

// ReadLoad implements syncring.LoadSource: this router's own load on every
// engine of the pool, read with reservations excluded around mark.
func (r *Router) ReadLoad(dst []syncring.Load, mark func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.pool.Engines() {
		if i < len(dst) {
			dst[i] = r.loadOf(e).Load
		}
	}
	mark()
}

// PeerLoad returns the other replicas' load on e (zero when alone).
func (r *Router) PeerLoad(e *engine.Engine) syncring.Load {
	if r.fleet == nil {
		return syncring.Load{}
	}
	if v, i := r.fleet.PeerLoad(), r.pos[e]; i < len(v) {
		return v[i]
	}
	return syncring.Load{}
}

// candidates appends to out the engines that can serve the request.
func (r *Router) candidates(out []*engine.Engine, model string, needs wire.Feature) []*engine.Engine {
	for _, e := range r.pool.Engines() {
		if e.Ready() && e.Features()&needs == needs && e.Serves(model) {
			out = append(out, e)
		}
	}
	return out
}

// withRoom appends to out the engines of cands below MaxInflight (which
// must be set).
func (r *Router) withRoom(out, cands []*engine.Engine) []*engine.Engine {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range cands {
		if r.loadOf(e).Requests < int64(r.w.MaxInflight) {
			out = append(out, e)
		}
	}
	return out
}

func (r *Router) loadOf(e *engine.Engine) *engineLoad {
	l, ok := r.inflight[e]
	if !ok {
		l = &engineLoad{pend: PendingPrefill{Delay: int64(r.w.ReportDelay)}}
		r.inflight[e] = l
	}
	return l
}

// Inflight returns a copy of the router's own load on e.
func (r *Router) Inflight(e *engine.Engine) syncring.Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadOf(e).Load
}

// monoEpoch anchors monoNanos.
var monoEpoch = time.Now()

// monoNanos is t on the monotonic clock, for PendingPrefill: a step of the
// wall clock must not make old reservations look new or new ones old.
func monoNanos(t time.Time) int64 { return int64(t.Sub(monoEpoch)) }

// queued is the work ahead of a new request on e. Prefill: the engine's
// last report plus the fleet's reservations since (PendingPrefill). Decode
// and requests: the fleet's reservations (this router's plus its peers')
// or the report, whichever is larger (the report lags new reservations,
// and reservations of decode do not overstate it as those of prefill do).
func (r *Router) queued(e *engine.Engine) (prefill, decode, requests float64) {
	rep, seq, at := e.LoadReport()
	peers := r.PeerLoad(e)
	reported := 0.0
	if rep != nil {
		reported = float64(rep.QueuedPrefillTokens)
	}
	r.mu.Lock()
	l := r.loadOf(e)
	own := l.Load
	l.pend.Report(seq, monoNanos(at), float64(peers.PrefillTokens))
	prefill = l.pend.Queued(reported, float64(peers.PrefillTokens))
	r.mu.Unlock()
	decode = float64(own.DecodeTokens + peers.DecodeTokens)
	requests = float64(own.Requests + peers.Requests)
	if rep != nil {
		decode = max(decode, float64(rep.ActiveDecodeTokens))
		requests = max(requests, float64(rep.Running+rep.Waiting))
	}
	return
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
}

// Cost is the policy's score of a candidate for a prompt of n tokens (lower
// is better). kv: estimated time to first token in ms, from queued and
// uncached prefill (lower tiers and approximate hits at a discount) over
// the prefill rate, plus the decode batch every prefill chunk carries.
// dynamo: prefill blocks - overlap + decode blocks.
func (w *Weights) Cost(p Policy, c *Candidate, n int) float64 {
	m, bs := c.Match, float64(max(c.BlockSize, 1))
	if p == PolicyDynamo {
		return (c.QueuedPrefill+float64(n))/bs - float64(m.Depth()) + c.ActiveDecode/bs
	}
	uncached := float64(n) - bs*(float64(m.Blocks[kvstore.TierGPU])+
		float64(m.Blocks[kvstore.TierCPU])*(1-w.CPUBlockCost)+
		float64(m.Blocks[kvstore.TierDisk])*(1-w.DiskBlockCost)+
		float64(m.Approx)*(1-w.ApproxBlockCost))
	work := c.QueuedPrefill + max(uncached, 1)
	cost := work/w.PrefillTokensPerMs + w.DecodeMsPerKToken*c.ActiveDecode/1000
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

func (r *Router) leastLoad(cands []*engine.Engine) *Decision {
	bestLoad := math.Inf(1)
	var best []*engine.Engine
	for _, e := range cands {
		switch _, _, n := r.queued(e); {
		case n < bestLoad:
			best, bestLoad = append(best[:0], e), n
		case n == bestLoad:
			best = append(best, e) // ties are broken at random below
		}
	}
	return &Decision{Engine: best[rand.IntN(len(best))]}
}

// session picks by rendezvous hashing of the session key, so a session
// stays on its engine while the engine set is stable.
func (r *Router) session(cands []*engine.Engine, req *Request) *Decision {
	key := req.Session
	if key == "" {
		return &Decision{Engine: cands[r.rr.Add(1)%uint64(len(cands))]}
	}
	var best *engine.Engine
	var bestScore uint64
	for _, e := range cands {
		if s := xxh3.HashString(key + "\x00" + e.Addr); best == nil || s > bestScore {
			best, bestScore = e, s
		}
	}
	return &Decision{Engine: best}
}

// byCost is the kv (and approx-prefix) policy: the least estimated time to
// first token, near-ties broken at random so replicas do not herd. The
// prompt is hashed once per hash scheme and matched against all candidates
// of that scheme in one index call.
func (r *Router) byCost(s *scratch, cands []*engine.Engine, req *Request) (*Decision, error) {
	groups := s.group(cands, req.Model)
	s.all = s.all[:0]
	best := math.Inf(1)
	for gi := range groups {
		g := &groups[gi]
		keys := req.Keys
		keys.LoRAID = g.sc.lora
		var err error
		if g.hs, err = g.sc.h.Hash(g.hs, req.Tokens, &keys); err != nil {
			return nil, fmt.Errorf("route: hashing prompt: %w", err)
		}
		matches := r.matchAll(s, g.es, g.hs)
		bs := g.sc.h.BlockSize()
		for i, e := range g.es {
			prefill, decode, _ := r.queued(e)
			maxBatched, capacity := e.Shape()
			c := Candidate{Match: matches[i], BlockSize: bs, QueuedPrefill: prefill, ActiveDecode: decode,
				MaxBatched: maxBatched, CapacityTokens: capacity}
			cost := r.w.Cost(r.policy, &c, len(req.Tokens))
			s.all = append(s.all, scored{e, cost, matches[i], bs, g.hs})
			best = min(best, cost)
		}
	}
	if len(s.all) == 0 {
		return nil, ErrNoEngine
	}
	s.near = s.near[:0]
	for _, c := range s.all {
		if c.cost <= best*(1+r.w.TieFraction) {
			s.near = append(s.near, c)
		}
	}
	pick := s.near[rand.IntN(len(s.near))]
	d := &Decision{Engine: pick.e, Match: pick.match, PredictedCached: pick.bs * pick.match.Depth()}
	if r.approx != nil {
		r.recordApprox(pick.e, pick.hashes)
	}
	return d, nil
}

// matchAll matches hs against every engine of es at once (the router's own
// approximate index for approx-prefix, the shared index otherwise). The
// result is in s, valid until the next call.
func (r *Router) matchAll(s *scratch, es []*engine.Engine, hs []uint64) []kvstore.Match {
	s.out = slices.Grow(s.out[:0], len(es))[:len(es)]
	s.slots = slices.Grow(s.slots[:0], len(es))[:len(es)]
	index := r.pool.Index()
	for i, e := range es {
		ok := false
		if r.approx != nil {
			s.slots[i], ok = r.approxSlot(e)
		} else {
			s.slots[i], ok = e.Slot()
		}
		if !ok {
			s.slots[i] = kvstore.MaxSlots // matches nothing
		}
	}
	if r.approx != nil {
		index = r.approx
	}
	index.Match(hs, s.slots, s.out)
	return s.out
}

func (r *Router) approxSlot(e *engine.Engine) (kvstore.Slot, bool) {
	if s, ok := r.aslots.Load(e); ok {
		return s.(kvstore.Slot), true
	}
	info := e.Info()
	slots, err := r.approx.AddEngine(kvstore.EngineConfig{ID: e.Addr, Capacity: [kvstore.NumTiers]uint64{info.Capacity(0)}})
	if err != nil {
		return 0, false
	}
	r.aslots.Store(e, slots[0])
	return slots[0], true
}

func (r *Router) recordApprox(e *engine.Engine, hs []uint64) {
	if s, ok := r.approxSlot(e); ok {
		_ = r.approx.RecordApprox(s, hs)
	}
}

// FirstToken moves the request's reservation from prefill to decode.
func (d *Decision) FirstToken() {
	if d.first.Swap(true) || d.done.Load() {
		return
	}
	prefill := int64(d.prompt - d.PredictedCached)
	d.r.mu.Lock()
	l := d.r.loadOf(d.Engine)
	l.PrefillTokens -= prefill
	l.pend.Started(d.tag)
	l.DecodeTokens += int64(d.prompt)
	d.r.broadcast(d.Engine, syncring.Load{PrefillTokens: -prefill, DecodeTokens: int64(d.prompt)})
	d.r.mu.Unlock()
}

// Generated grows the request's decode load by n new tokens: each one's
// KV stays in the engine's batch until the request ends.
func (d *Decision) Generated(n int) {
	if n <= 0 || d.done.Load() {
		return
	}
	d.r.mu.Lock()
	d.r.loadOf(d.Engine).DecodeTokens += int64(n)
	d.generated += int64(n)
	d.r.mu.Unlock()
}

// Done releases the request's reservation.
func (d *Decision) Done() {
	if d.done.Swap(true) {
		return
	}
	d.r.mu.Lock()
	l := d.r.loadOf(d.Engine)
	delta := syncring.Load{Requests: -1}
	if d.first.Load() {
		delta.DecodeTokens = -(int64(d.prompt) + d.generated)
	} else {
		delta.PrefillTokens = -int64(d.prompt - d.PredictedCached)
		l.pend.Started(d.tag)
	}
	l.PrefillTokens += delta.PrefillTokens
	l.DecodeTokens += delta.DecodeTokens
	l.Requests--
	d.r.broadcast(d.Engine, delta)
	d.r.mu.Unlock()
}
