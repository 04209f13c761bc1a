package sim

import (
	"context"
	"runtime"
	"time"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// A free engine (a profile whose steps and loads take no time, as
// --sim-profile zero, and no hand-offs) has nothing to wait for, so it
// runs a request on the goroutine that hands it over instead of waking a
// rank that wakes the writer. The router connection's read goroutine adds
// the GENERATEs of one read; then (serve.Batcher's EndBatch) it drives the
// ranks: a burst of steps back to back, at most maxStepsAhead, whose KV
// events and frames leave in one write per connection. A stream whose
// answer ends in the burst reaches a router that batches (TOKEN_BATCH) in
// one frame: the engine has every token when it writes. The others get
// the frames of a writer that keeps up, one a stream for each step, in
// fewer writes (burstFrames). A burst is written in the writer's turn
// (outbox.writeHere), or queued for the writer when it is busy.
//
// A run longer than a burst (work left after maxStepsAhead steps) goes on
// in the rank's goroutine the way a paced rank runs (pipeline): each step's
// outputs to the writer, which sends what piled up while it wrote, the
// rank waiting when it is maxStepsAhead steps ahead. So long streams leave
// in the frames they always did.
//
// One goroutine at a time drives a rank (rank.driving, under rank.mu), so
// steps, their events and their frames leave in order. A goroutine that
// finds the rank driven leaves its work to the driver, which looks for
// work again, under the same lock, before it lets go. A CANCEL's last
// output joins the rank's queue (rank.late) under that lock, behind the
// outputs of the steps before it.

// inlineBurst is what a driver collects, its arrays reused.
type inlineBurst struct {
	outs   []Output
	events []wire.Message
	fb     frameBuilder
}

// free reports whether a server with cfg runs its requests inline.
func free(cfg *Config) bool {
	return cfg.Rank.Profile.free() && cfg.Rank.Disagg.Role == wire.RoleBoth
}

// EndBatch runs a burst on every rank with work that nobody drives
// (serve.Batcher): the requests of a read from a router are handed over.
func (b backend) EndBatch(uint64) {
	if !b.s.inline {
		return
	}
	for _, rk := range b.s.ranks {
		if rk.claim() {
			rk.burst()
			if rk.release() {
				rk.poke() // the rank's goroutine goes on
			}
		}
	}
}

// claim makes the caller the rank's driver if it has work and no driver.
func (rk *rank) claim() bool {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	if rk.driving || !rk.hasWork() {
		return false
	}
	rk.driving = true
	return true
}

// release ends the caller's drive and reports whether work is left.
func (rk *rank) release() bool {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	rk.driving = false
	return rk.hasWork()
}

// hasWork reports whether the rank has something to run or send; rk.mu
// is held.
func (rk *rank) hasWork() bool {
	return !rk.core.Idle() || len(rk.late) > 0 || len(rk.snaps) > 0
}

// takeLate moves the CANCELs' outputs to outs; rk.mu is held.
func (rk *rank) takeLate(outs []Output) []Output {
	outs = append(outs, rk.late...)
	clear(rk.late)
	rk.late = rk.late[:0]
	return outs
}

// step runs one step; rk.mu is held. Its outputs follow outs; its events
// come as the KV_EVENTS to send, nil when there are none.
func (rk *rank) step(outs []Output) ([]Output, *wire.KVEvents) {
	res := rk.core.stepAppend(outs)
	if invariants {
		if err := rk.core.Check(); err != nil {
			panic(err)
		}
	}
	if len(res.Events) == 0 || rk.srv.cfg.NoKVEvents {
		return res.Outputs, nil
	}
	rk.seq++
	return res.Outputs, &wire.KVEvents{Seq: rk.seq, TimestampNano: time.Now().UnixNano(), DPRank: uint16(rk.id),
		Events: wireEvents(res.Events)}
}

// burst answers the snapshot requests, runs up to maxStepsAhead steps and
// sends their events and frames. The caller drives the rank.
func (rk *rank) burst() {
	b := &rk.inline
	for steps := 0; ; steps++ {
		rk.mu.Lock()
		if steps == 0 {
			// Every earlier step's events are out: a snapshot at seq N
			// holds exactly batches 1..N.
			rk.serveSnapshots()
		}
		b.outs = rk.takeLate(b.outs)
		if rk.core.Idle() || steps == maxStepsAhead {
			rk.mu.Unlock()
			break
		}
		var ev *wire.KVEvents
		b.outs, ev = rk.step(b.outs)
		rk.mu.Unlock()
		if ev != nil {
			b.events = append(b.events, ev)
		}
	}
	rk.srv.sendBurst(b)
}

// sendBurst writes a burst's events, then its frames, in the writer's
// turn, and forgets the requests that ended; with the writer busy, the
// events go now and the outputs to the writer.
func (s *Server) sendBurst(b *inlineBurst) {
	switch {
	case len(b.outs) == 0:
		if len(b.events) > 0 {
			s.srv.Publish(b.events, nil)
		}
	case s.out.writeHere():
		s.srv.Publish(b.events, b.fb.burstFrames(b.outs, s.batches))
		s.finished(b.outs)
		s.out.done()
	default:
		if len(b.events) > 0 {
			s.srv.Publish(b.events, nil)
		}
		s.out.add(b.outs, false)
	}
	clear(b.outs)
	clear(b.events)
	b.outs, b.events = b.outs[:0], b.events[:0]
}

// burstFrames builds a burst's frames for every router. A stream whose
// answer ends in the burst has all of its tokens when the burst is
// written, so a router that takes several steps' tokens in a frame
// (batches) gets them in one (PROTOCOL.md 6.2.1: an engine batches only
// tokens it has when it writes). A stream that goes on gets a frame for
// each step, as from a writer that keeps up: a burst is the steps a free
// engine makes faster than it writes, and merging a long stream's first
// burst would hand the router fewer, larger frames than any engine whose
// steps take time sends.
func (fb *frameBuilder) burstFrames(outs []Output, batches func(conn uint64) bool) []serve.Tokens {
	if fb.ended == nil {
		fb.ended = map[serve.Key]bool{}
	}
	for i := range outs {
		if outs[i].Finish != wire.FinishNone {
			fb.ended[serve.Key(outs[i].Key)] = true
		}
	}
	frames := fb.frames(outs, batches, true)
	clear(fb.ended)
	return frames
}

// runFree is a free rank's goroutine: it drives the rank when poked (a
// snapshot request, a request that waited for its adapter, a run longer
// than a burst).
func (rk *rank) runFree(ctx context.Context) {
	for {
		select {
		case <-rk.wake:
		case <-ctx.Done():
			return
		}
		if rk.claim() {
			rk.pipeline(ctx)
		}
	}
}

// pipeline drives the rank until it has no work, step by step as a paced
// rank runs (rank.run): events at once, outputs to the writer. The
// caller drives the rank; pipeline ends the drive.
func (rk *rank) pipeline(ctx context.Context) {
	b := &rk.inline
	for {
		rk.mu.Lock()
		rk.serveSnapshots()
		b.outs = rk.takeLate(b.outs[:0])
		if rk.core.Idle() || ctx.Err() != nil {
			if len(b.outs) == 0 {
				rk.driving = false
				rk.mu.Unlock()
				return
			}
			rk.mu.Unlock()
			rk.srv.out.add(b.outs, false)
			continue
		}
		var ev *wire.KVEvents
		b.outs, ev = rk.step(b.outs)
		rk.mu.Unlock()
		runtime.Gosched()
		if ev != nil {
			rk.srv.srv.Broadcast(ev)
		}
		rk.srv.deliver(b.outs) // copies them
		clear(b.outs)
	}
}
