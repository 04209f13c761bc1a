package sim

import (
	"runtime"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// A free engine (a profile whose steps and loads take no time, as
// --sim-profile zero, and no hand-offs) has nothing to wait for, so it
// runs a request on the goroutine that hands it over instead of waking a
// rank that wakes a writer. The router connection's read goroutine adds
// the GENERATEs of one read; then (serve.Batcher's EndBatch) it drives
// the ranks: their steps back to back, a burst of at most maxStepsAhead
// (the most steps the writer lets pile up), then the burst's KV events
// and frames, in one write per connection. The frames are the writer's
// for as many pending steps: for a router that batches, each stream's
// tokens of the burst in one frame; for one that does not, a frame a
// token. Work left after a full burst goes on in the rank's goroutine,
// burst after burst.
//
// One goroutine at a time drives a rank (rank.driving, under rank.mu), so
// steps, their events and their frames leave in order. A goroutine that
// finds the rank driven leaves its work to the driver, which looks for
// work again, under the same lock, before it lets go. A CANCEL's last
// output joins the rank's queue (rank.late) under that lock, behind the
// outputs of the steps before it.

// inlineBurst is what a driver collects in a burst, its arrays reused.
type inlineBurst struct {
	outs   []Output
	events []wire.Message
	fb     frameBuilder
}

// free reports whether a server with cfg runs its requests inline.
func free(cfg *Config) bool {
	return cfg.Rank.Profile.free() && cfg.Rank.Disagg.Role == wire.RoleBoth
}

// EndBatch drives every rank with work (serve.Batcher): the requests of
// a read from a router are handed over.
func (b backend) EndBatch(uint64) {
	if !b.s.inline {
		return
	}
	for _, rk := range b.s.ranks {
		rk.drive(true)
	}
}

// runFree is a free rank's goroutine: it drives the rank when poked (a
// snapshot request, a request that waited for its adapter, a run longer
// than a burst).
func (rk *rank) runFree() {
	ctx := rk.srv.ctx
	for {
		select {
		case <-rk.wake:
		case <-ctx.Done():
			return
		}
		rk.drive(false)
	}
}

// drive runs the rank's work, burst after burst, unless another
// goroutine drives it. handOver makes it stop after a full burst with
// work left and leave that to the rank's goroutine.
func (rk *rank) drive(handOver bool) {
	rk.mu.Lock()
	if rk.driving || !rk.hasWork() {
		rk.mu.Unlock()
		return
	}
	rk.driving = true
	rk.mu.Unlock()
	for {
		full := rk.burst()
		rk.mu.Lock()
		stop := !rk.hasWork() || rk.srv.ctx.Err() != nil
		if stop || (full && handOver) {
			rk.driving = false
			rk.mu.Unlock()
			if !stop {
				rk.poke()
			}
			return
		}
		rk.mu.Unlock()
		if full {
			runtime.Gosched() // a long run: let the read loops in between bursts
		}
	}
}

// hasWork reports whether the rank has something to run or send; rk.mu
// is held.
func (rk *rank) hasWork() bool {
	return !rk.core.Idle() || len(rk.late) > 0 || len(rk.snaps) > 0
}

// burst answers the snapshot requests, runs up to maxStepsAhead steps
// and sends their events and frames; it reports whether it ran them all.
// The caller drives the rank.
func (rk *rank) burst() (full bool) {
	b := &rk.inline
	steps := 0
	for {
		rk.mu.Lock()
		if steps == 0 {
			// Between bursts every earlier step's events are out: a
			// snapshot at seq N holds exactly batches 1..N.
			rk.serveSnapshots()
		}
		if len(rk.late) > 0 {
			b.outs = append(b.outs, rk.late...)
			clear(rk.late)
			rk.late = rk.late[:0]
		}
		if rk.core.Idle() || steps == maxStepsAhead {
			rk.mu.Unlock()
			break
		}
		res := rk.core.stepAppend(b.outs)
		b.outs = res.Outputs
		if invariants {
			if err := rk.core.Check(); err != nil {
				panic(err)
			}
		}
		if len(res.Events) > 0 && !rk.srv.cfg.NoKVEvents {
			rk.seq++
			b.events = append(b.events, &wire.KVEvents{Seq: rk.seq, TimestampNano: time.Now().UnixNano(),
				DPRank: uint16(rk.id), Events: wireEvents(res.Events)})
		}
		rk.mu.Unlock()
		steps++
	}
	rk.srv.sendBurst(b)
	return steps == maxStepsAhead
}

// sendBurst writes a burst's events, then its frames, and forgets the
// requests that ended. A router that does not batch, the rare one, gets
// its frames in a second write.
func (s *Server) sendBurst(b *inlineBurst) {
	if len(b.outs) > 0 || len(b.events) > 0 {
		s.srv.Publish(b.events, b.fb.frames(b.outs, s.batches, true))
		if frames := b.fb.frames(b.outs, s.batches, false); len(frames) > 0 {
			s.srv.Deliver(frames)
		}
	}
	s.finished(b.outs)
	clear(b.outs)
	clear(b.events)
	b.outs, b.events = b.outs[:0], b.events[:0]
}
