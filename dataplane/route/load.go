package route

import (
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/syncring"
	"github.com/kvgate/kvgate/wire"
)

// Fleet is the rest of the fleet of kvgate replicas (a syncring.Ring): their
// load on every engine, indexed like the pool's engines, and the broadcast
// of this replica's load changes (reservations, first tokens, releases).
type Fleet interface {
	PeerLoad() []syncring.Load
	Reserve(engine int, delta syncring.Load)
}

// engineLoad is a router's view of one engine: its own load there (the
// work it has sent and not yet seen finish), the unit the fleet counts,
// and the same per data-parallel rank with each rank's queued-prefill
// estimate (ranks.go).
type engineLoad struct {
	syncring.Load
	ranks []rankLoad
	e     *engine.Engine
}

// broadcast tells the fleet of a change of this router's load on e. Call it
// under mu, with the change: ReadLoad's mark must see both or neither.
func (r *Router) broadcast(e *engine.Engine, delta syncring.Load) {
	if r.fleet != nil {
		r.fleet.Reserve(e.Pos(), delta)
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
	for _, e := range r.pool.Engines() {
		if i := e.Pos(); i < len(dst) {
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
	if v, i := r.fleet.PeerLoad(), e.Pos(); i < len(v) {
		return v[i]
	}
	return syncring.Load{}
}

// loadOf is the router's view of e, made the first time e is seen. Call it
// under mu. The view is found by e's place in the pool (two loads) while e
// holds it, and by the map otherwise: a place is reused once its engine
// leaves, and a view lives as long as the decisions that hold load there.
func (r *Router) loadOf(e *engine.Engine) *engineLoad {
	pos := e.Pos()
	if pos >= 0 && pos < len(r.byPos) {
		if l := r.byPos[pos]; l != nil && l.e == e {
			return l
		}
	}
	l, ok := r.inflight[e]
	if !ok {
		l = &engineLoad{e: e}
		r.inflight[e] = l
	}
	if pos >= 0 && pos < 1<<16 {
		if pos >= len(r.byPos) {
			r.byPos = append(r.byPos, make([]*engineLoad, pos+1-len(r.byPos))...)
		}
		r.byPos[pos] = l
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

// queued is the work ahead of a new request on rank of e. Prefill: the
// rank's last report plus the fleet's reservations since (PendingPrefill).
// Decode and requests: the fleet's reservations (this router's plus its
// peers') or the report, whichever is larger (the report lags new
// reservations, and reservations of decode do not overstate it as those
// of prefill do).
func (r *Router) queued(e *engine.Engine, rank uint16) (prefill, decode, requests float64) {
	var q [1]queue
	r.queuedAll(q[:], []cand{{e: e, rank: rank}})
	return q[0].prefill, q[0].decode, q[0].requests
}

// queue is queued's answer for one candidate and what it reads on the way.
type queue struct {
	rep                       *wire.Load
	seq                       uint64
	at                        time.Time
	peers, own                syncring.Load
	prefill, decode, requests float64
}

// queuedAll is queued for every candidate of cs into qs (as long as cs),
// under one hold of mu for them all: a decision scores every candidate,
// and a lock, a map lookup and a clock conversion each were most of a
// candidate's cost.
func (r *Router) queuedAll(qs []queue, cs []cand) {
	for i, c := range cs {
		q := &qs[i]
		q.rep, q.seq, q.at = c.e.RankLoadReport(c.rank)
		q.peers = r.peerRankLoad(c.e)
	}
	r.mu.Lock()
	for i, c := range cs {
		q := &qs[i]
		reported := 0.0
		if q.rep != nil {
			reported = float64(q.rep.QueuedPrefillTokens)
		}
		_, rl := r.rankOf(c.e, c.rank)
		q.own = rl.Load
		rl.report(q.seq, q.at, float64(q.peers.PrefillTokens))
		q.prefill = rl.pend.Queued(reported, float64(q.peers.PrefillTokens))
	}
	r.mu.Unlock()
	for i := range qs[:len(cs)] {
		q := &qs[i]
		q.decode = float64(q.own.DecodeTokens + q.peers.DecodeTokens)
		q.requests = float64(q.own.Requests + q.peers.Requests)
		if q.rep != nil {
			q.decode = max(q.decode, float64(q.rep.ActiveDecodeTokens))
			q.requests = max(q.requests, float64(q.rep.Running+q.rep.Waiting))
		}
	}
}
