package syncring

import (
	"sync"
	"time"
)

// BroadcastDelay bounds how often a replica broadcasts reservations: a
// reservation goes out at once when none went out within the delay, else
// it waits for the others of that millisecond to share one message.
const BroadcastDelay = time.Millisecond

// reserver batches this replica's reservations and broadcasts them.
type reserver struct {
	r       *Ring
	mu      sync.Mutex
	batch   reserveBatch
	epoch   uint64 // the epoch whose vector positions batch uses
	timer   *time.Timer
	armed   bool      // timer pending
	last    time.Time // last broadcast
	stopped bool
}

func (b *reserver) init(r *Ring) { b.r = r }

// Reserve tells the other replicas at once (within BroadcastDelay) that
// this replica's load on engine (the caller's position, as in
// Config.Engines) has just changed by d: a routing decision's reservation
// (prefill tokens and one request), a first token (prefill moved to
// decode), a request's end. Call it while the change is excluded from
// LoadSource.ReadLoad (under the same lock), so that the peers can tell
// exactly which round includes it. An engine the ring's members do not all
// share is not broadcast: no peer routes to it.
func (r *Ring) Reserve(engine int, d Load) {
	m := r.vmap.Load()
	if r.cfg.NoBroadcast || engine < 0 || engine >= len(m.posOf) || m.posOf[engine] < 0 {
		return
	}
	b := &r.res
	tag := r.snap.Load() + 1 // the first own-load snapshot that will count it
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	if len(b.batch.Items) > 0 && (b.batch.Tag != tag || b.epoch != m.epoch) {
		b.flushLocked() // a snapshot or an epoch came between: keep tags and positions exact
	}
	b.batch.Tag, b.epoch = tag, m.epoch
	b.batch.Items = append(b.batch.Items, reservation{Engine: uint32(m.posOf[engine]), Load: d})
	if b.armed {
		return // the pending flush takes it
	}
	wait := BroadcastDelay - time.Since(b.last)
	if wait <= 0 {
		b.flushLocked() // quiet until now: no reason to wait
		return
	}
	b.armed = true
	if b.timer == nil {
		b.timer = time.AfterFunc(wait, b.flush)
	} else {
		b.timer.Reset(wait)
	}
}

func (b *reserver) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	b.flushLocked()
}

func (b *reserver) flushLocked() {
	if len(b.batch.Items) == 0 || b.stopped {
		return
	}
	b.last = time.Now()
	body := appendReserve(nil, b.epoch, &b.batch)
	b.batch.Items = b.batch.Items[:0]
	for _, l := range *b.r.links.Load() {
		if l.enqueue(body) {
			b.r.metrics.bytesOut.Add(uint64(len(body) + 12))
		}
	}
}

func (b *reserver) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

// addPending records a peer's reservations until a round includes them.
func (s *loopState) addPending(p *peer, b reserveBatch) {
	e := len(s.order)
	for _, it := range b.Items {
		if int(it.Engine) >= e {
			s.r.metrics.ignored.Add(1)
			return
		}
	}
	b.Items = append([]reservation(nil), b.Items...)
	p.pending = append(p.pending, b)
	for _, it := range b.Items {
		s.addLoad(it.Engine, it.Load, 1)
	}
	s.publishView()
}

// dropPending removes p's reservations with tags up to snap (its snapshot
// number in a completed round: they are in the round's sum now).
func (s *loopState) dropPending(p *peer, snap uint64) {
	if p == nil {
		return
	}
	n := 0
	for _, b := range p.pending {
		if b.Tag > snap {
			break // tags only grow
		}
		for _, it := range b.Items {
			s.addLoad(it.Engine, it.Load, -1)
		}
		n++
	}
	p.pending = p.pending[n:]
}

// addLoad adds sign x l to the pending sum of an engine.
func (s *loopState) addLoad(engine uint32, l Load, sign int64) {
	i := int(engine) * loadValues
	s.pendingSum[i] += sign * l.PrefillTokens
	s.pendingSum[i+1] += sign * l.DecodeTokens
	s.pendingSum[i+2] += sign * l.Requests
}
