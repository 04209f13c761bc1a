package route

import (
	"fmt"
	"math"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// Conditional disaggregation (wire PROTOCOL.md 6.10). When the model has
// prefill engines (role prefill), the kv policy weighs, for each request,
// serving it aggregated on the best decode-capable engine against
// prefilling it on the best prefill engine and handing it to the best
// decode engine, and takes the cheaper, with both sides' costs from the
// one cost model (Weights.Cost):
//
//	aggregated  = Cost(d) + stall(d)
//	split       = max(Cost(p) + transfer(p -> d') + Cost₀(d', 1), Cost(d', 1))
//
// Cost is the time to first token on an engine, its queued prefill
// included. stall(d) is what the prefill does to the decode batch d is
// running: each of its chunks is a step every running sequence waits
// for, so a prompt's uncached part u costs d's batch u/rate ms (0 when d
// decodes nothing). A split's decode side computes the one token left
// once the KV has crossed the link (transfer: the prompt blocks d' lacks,
// DisaggLink over their KV bytes, Weights.KVBytesPerToken) and once the
// prefill queued on d' ahead of it is done: that queue drains while the
// prefill engine works, so it delays the split only by what is left of
// it then (Cost(d', 1), against Cost₀(d', 1) with an empty queue), while
// it delays an aggregated request by all of it. So a short uncached
// part, or a decode engine that already holds the prefix, is served
// aggregated; a long prefill next to a busy decode batch, or behind a
// decode engine's queued prefill while a prefill engine is idle, is
// split: the threshold is where the two meet, not a constant. LoRA
// requests are served aggregated (adapters are not handed over).

// DisaggLink is the KV link a router assumes between a prefill and a
// decode engine (engines do not announce it), as kvgate-sim's default
// (perf/sim DefaultKVLink): a 200 Gb/s RDMA NIC, and 1 ms for the
// hand-off's round trips (the decode GENERATE's hop, the read's setup and
// its completion notice). With the default weights a split then pays off
// for an uncached part over about (1 + 1/66) / (1/66 - 147456/25e6) ≈ 110
// tokens next to a busy decode batch.
var DisaggLink = TierLink{LatencyMs: 1, BytesPerMs: 25e6}

// HandoffDeadline is how long a prefill engine keeps a request's KV for
// its decode engine, and the decode engine waits for it
// (Handoff.DeadlineMillis).
const HandoffDeadline = 30 * time.Second

// roleOf is an engine's role; an engine that announces an impossible one
// takes ordinary requests only, as one from before the hand-off.
func roleOf(e *engine.Engine) wire.EngineRole {
	r, err := wire.RoleOf(e.Features())
	if err != nil {
		return wire.RoleBoth
	}
	return r
}

// takesOrdinary reports whether e serves ordinary (aggregated) requests:
// every engine but a prefill-only one.
func takesOrdinary(e *engine.Engine) bool { return roleOf(e) != wire.RolePrefill }

// disaggSide is a candidate for one side and its costs.
type disaggSide struct {
	c     cand
	match kvstore.Match
	bs    int
	cand  Candidate
	cost  float64 // Weights.Cost of the whole prompt
	stall float64 // what its prefill does to its decode batch
}

// routeDisagg decides between aggregated and split serving when the
// model has prefill engines; handled is false when it has none (or the
// request cannot be split), and Route goes on as ever.
func (r *Router) routeDisagg(s *scratch, req *Request) (d *Decision, handled bool, err error) {
	if !r.WeighsSplit(req) {
		return nil, false, nil
	}
	var prefill, decode []cand
	for _, e := range r.pool.Engines() {
		if !e.Ready() || e.Features()&req.Needs != req.Needs {
			continue
		}
		_, lora, ok := e.Resolve(req.Model)
		if !ok {
			continue
		}
		role := roleOf(e)
		for rank := range e.Ranks() {
			c := cand{e: e, rank: uint16(rank), lora: lora}
			switch {
			case slicesHas(req.Exclude, e):
			case role == wire.RolePrefill:
				prefill = append(prefill, c)
			default:
				decode = append(decode, c)
			}
		}
	}
	w := r.weights()
	if w.MaxInflight > 0 { // an engine at its bound takes neither side
		prefill, decode = r.withRoom(nil, prefill), r.withRoom(nil, decode)
	}
	if len(prefill) == 0 || len(decode) == 0 {
		return nil, false, nil
	}
	ps, err := r.scoreSides(s, prefill, req, w)
	if err != nil {
		return nil, true, err
	}
	ds, err := r.scoreSides(s, decode, req, w)
	if err != nil {
		return nil, true, err
	}
	n := len(req.Tokens)
	agg := bestBy(w, ds, func(x *disaggSide) float64 { return x.cost + x.stall })
	p := bestBy(w, ps, func(x *disaggSide) float64 { return x.cost })
	if agg == nil || p == nil {
		return nil, false, nil
	}
	dec := bestBy(w, ds, func(x *disaggSide) float64 { return r.decodeCost(w, x, n, p.cost) })
	if dec == nil {
		return nil, false, nil
	}
	ch := SplitChoice{Aggregated: &agg.cand, PrefillCost: p.cost, Decode: &dec.cand, Prompt: n, MaxTokens: req.MaxTokens}
	if !w.ShouldSplit(&ch) { // disagg_slo.go
		return nil, false, nil // aggregated is better: Route's own choice serves it
	}
	pd := &Decision{Engine: p.c.e, Rank: p.c.rank, Match: p.match, PredictedCached: p.bs * p.match.Depth()}
	dd := &Decision{Engine: dec.c.e, Rank: dec.c.rank, Match: dec.match, PredictedCached: n, Prefill: pd}
	r.reservePair(pd, dd, n)
	return dd, true, nil
}

// decodeCost is when decode candidate x would compute the request's
// second token were it prefilled on an engine of cost prefillCost
// (Weights.HandoffCost); +Inf when it serves no hand-off.
func (r *Router) decodeCost(w *Weights, x *disaggSide, n int, prefillCost float64) float64 {
	if x.c.e.Features()&wire.FeatureDisagg == 0 {
		return math.Inf(1) // serves no hand-off: aggregated only
	}
	return w.HandoffCost(prefillCost, &x.cand, n)
}

// AggregatedCost is serving an n-token prompt aggregated on c: its cost,
// and the stall its uncached part's prefill puts on c's decode batch.
func (w *Weights) AggregatedCost(c *Candidate, n int) float64 {
	return w.Cost(PolicyKV, c, n) + w.stall(c, n)
}

func (w *Weights) stall(c *Candidate, n int) float64 {
	if c.ActiveDecode <= 0 {
		return 0
	}
	return max(float64(n-max(c.BlockSize, 1)*c.Match.Depth()), 0) / w.PrefillTokensPerMs
}

// HandoffCost is when decode candidate d computes the second token of an
// n-token prompt prefilled on an engine of cost prefillCost
// (Weights.Cost there; its first token): after the prompt blocks d lacks
// have crossed DisaggLink and after the prefill queued on d ahead of the
// hand-off, which drains meanwhile; +Inf when the KV d's decode batch
// holds leaves no room for the prompt's (its queued prefill does not
// count: it delays the hand-off as it would the request aggregated).
func (w *Weights) HandoffCost(prefillCost float64, d *Candidate, n int) float64 {
	if d.CapacityTokens > 0 && d.CapacityTokens-d.ActiveDecode < float64(n) {
		return math.Inf(1)
	}
	missing := max(n-max(d.BlockSize, 1)*d.Match.Depth(), 0)
	transferMs := DisaggLink.LatencyMs + float64(missing)*w.KVBytesPerToken/DisaggLink.BytesPerMs
	one := *d
	one.Match = kvstore.Match{}
	queued := w.Cost(PolicyKV, &one, 1) // the one token behind d's queue
	one.QueuedPrefill = 0
	return max(prefillCost+transferMs+w.Cost(PolicyKV, &one, 1), queued)
}

// scoreSides matches the prompt against cands and scores each.
func (r *Router) scoreSides(s *scratch, cands []cand, req *Request, w *Weights) ([]disaggSide, error) {
	var out []disaggSide
	for _, g := range s.group(cands) {
		keys := req.Keys
		hs, err := g.sc.h.Hash(nil, req.Tokens, &keys)
		if err != nil {
			return nil, fmt.Errorf("route: hashing prompt: %w", err)
		}
		bs := g.sc.h.BlockSize()
		matches := r.matchAll(s, g.es, hs[:matchBlocks(g.es, len(hs), len(req.Tokens), bs)])
		for i, cd := range g.es {
			prefill, decode, _ := r.queued(cd.e, cd.rank)
			maxBatched, capacity := cd.e.Shape()
			c := Candidate{Match: matches[i], BlockSize: bs, QueuedPrefill: prefill, ActiveDecode: decode,
				MaxBatched: maxBatched, CapacityTokens: capacity}
			x := disaggSide{c: cd, match: matches[i], bs: bs, cand: c, cost: w.Cost(PolicyKV, &c, len(req.Tokens)),
				stall: w.stall(&c, len(req.Tokens))}
			out = append(out, x)
		}
	}
	return out, nil
}

// reservePair reserves the request on both engines in one critical
// section: prefill work on the prefill engine; on the decode engine one
// token of prefill (the rest arrives by transfer).
func (r *Router) reservePair(pd, dd *Decision, n int) {
	pd.r, pd.prompt = r, n
	dd.r, dd.prompt = r, n+1 // the prompt and the first token
	type report struct {
		seq   uint64
		at    time.Time
		peers syncring.Load
	}
	var reps [2]report
	for i, d := range []*Decision{pd, dd} {
		_, reps[i].seq, reps[i].at = d.Engine.RankLoadReport(d.Rank)
		reps[i].peers = r.peerRankLoad(d.Engine)
	}
	now := monoNanos(time.Now())
	r.mu.Lock()
	for i, d := range []*Decision{pd, dd} {
		prefill := d.prefill()
		rl, _ := r.change(d.Engine, d.Rank, syncring.Load{PrefillTokens: prefill, Requests: 1})
		rl.report(reps[i].seq, reps[i].at, float64(reps[i].peers.PrefillTokens))
		d.tag = rl.pend.Reserve(now, float64(prefill))
	}
	r.mu.Unlock()
}

// WeighsSplit reports whether Route weighs serving req disaggregated:
// a Split request without an adapter, under kv, with prefill engines in
// the pool. A decision for it without Prefill was served aggregated
// because that was cheaper (or no prefill engine had room).
func (r *Router) WeighsSplit(req *Request) bool {
	return req.Split && r.policy == PolicyKV && req.Keys.LoRAID == 0 && r.hasPrefill()
}

// hasPrefill reports whether any engine of the pool is a prefill engine.
func (r *Router) hasPrefill() bool {
	for _, e := range r.pool.Engines() {
		if roleOf(e) == wire.RolePrefill {
			return true
		}
	}
	return false
}

// bestBy returns a side of least cost f, near-ties picked at random as
// Route picks them (nil: none, or all infinite).
func bestBy(w *Weights, xs []disaggSide, f func(*disaggSide) float64) *disaggSide {
	costs := make([]float64, len(xs))
	for i := range xs {
		costs[i] = f(&xs[i])
	}
	i := w.PickNearTie(costs)
	if i < 0 || math.IsInf(costs[i], 1) {
		return nil
	}
	return &xs[i]
}

func slicesHas(es []*engine.Engine, e *engine.Engine) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}
