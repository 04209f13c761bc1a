package syncring

import (
	"sync"
	"time"
)

// BroadcastDelay is how long reservations wait to share one message.
const BroadcastDelay = time.Millisecond

// reserver batches this replica's reservations and broadcasts them.
type reserver struct {
	r       *Ring
	mu      sync.Mutex
	batch   reserveBatch
	timer   *time.Timer
	stopped bool
}

func (b *reserver) init(r *Ring) { b.r = r }

// Reserve tells the other replicas at once (within BroadcastDelay) that
// this replica has just sent engine (an index into Config.Engines) a
// request with prefill uncached prompt tokens. Call it while the local
// reservation is excluded from LoadSource.ReadLoad (under the same lock),
// so that the peers can tell exactly which round includes it.
func (r *Ring) Reserve(engine int, prefill int64) {
	if r.cfg.NoBroadcast || engine < 0 || engine >= len(r.cfg.Engines) {
		return
	}
	b := &r.res
	tag := r.snap.Load() + 1 // the first own-load snapshot that will count it
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	if len(b.batch.Items) > 0 && b.batch.Tag != tag {
		b.flushLocked() // a snapshot came between: keep tags exact
	}
	b.batch.Tag = tag
	b.batch.Items = append(b.batch.Items, reservation{Engine: uint32(r.pos(engine)), Prefill: prefill, Requests: 1})
	if b.timer == nil {
		b.timer = time.AfterFunc(BroadcastDelay, b.flush)
	} else if len(b.batch.Items) == 1 {
		b.timer.Reset(BroadcastDelay)
	}
}

func (b *reserver) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *reserver) flushLocked() {
	if len(b.batch.Items) == 0 || b.stopped {
		return
	}
	body := appendReserve(nil, b.r.epochID.Load(), &b.batch)
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

// pos is the vector position of the caller's engine index.
func (r *Ring) pos(engine int) int { return r.loop.posOf[engine] }

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
		s.pendingSum[int(it.Engine)*loadValues] += it.Prefill
		s.pendingSum[int(it.Engine)*loadValues+2] += it.Requests
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
			s.pendingSum[int(it.Engine)*loadValues] -= it.Prefill
			s.pendingSum[int(it.Engine)*loadValues+2] -= it.Requests
		}
		n++
	}
	p.pending = p.pending[n:]
}
