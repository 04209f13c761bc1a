package sim

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// rank drives one Core in real time: step, sleep the simulated duration
// divided by the speed, deliver the step's tokens and events.
type rank struct {
	id   int
	srv  *Server
	wake chan struct{}

	mu    sync.Mutex
	core  *Core
	seq   uint64 // KV_EVENTS batches sent
	snaps []snapshotReq
	// A free server's rank (inline.go): whether a goroutine drives it,
	// the CANCELs' last outputs it is to send, and its driver's arrays.
	driving bool
	late    []Output
	inline  inlineBurst
}

type snapshotReq struct {
	conn uint64
	id   uint32
}

// poke wakes the loop if it waits for work.
func (rk *rank) poke() {
	select {
	case rk.wake <- struct{}{}:
	default:
	}
}

func (rk *rank) load() wire.Load {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	l := rk.core.Load()
	l.DPRank = uint16(rk.id)
	l.TimestampNano = time.Now().UnixNano()
	return l
}

// idle reports whether the rank runs nothing and has nothing to send.
func (rk *rank) idle() bool {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	return rk.core.Idle() && !rk.driving && len(rk.late) == 0
}

func (rk *rank) requestSnapshot(conn uint64, id uint32) {
	rk.mu.Lock()
	rk.snaps = append(rk.snaps, snapshotReq{conn: conn, id: id})
	rk.mu.Unlock()
	rk.poke()
}

func (rk *rank) run(ctx context.Context) {
	if rk.srv.inline {
		rk.runFree(ctx) // inline.go
		return
	}
	speed := rk.srv.cfg.Speed
	for ctx.Err() == nil {
		rk.mu.Lock()
		// Snapshots are taken between steps, after the previous step's events
		// went out, so a snapshot at seq N holds exactly batches 1..N.
		rk.serveSnapshots()
		if rk.core.Idle() {
			rk.mu.Unlock()
			select {
			case <-rk.wake:
			case <-ctx.Done():
			}
			continue
		}
		res := rk.core.Step()
		if invariants {
			if err := rk.core.Check(); err != nil {
				panic(err)
			}
		}
		rk.mu.Unlock()
		if d := time.Duration(float64(res.Duration) / speed); d > 50*time.Microsecond {
			sleepCtx(ctx, d)
		} else {
			runtime.Gosched()
		}
		// Events before tokens: a router that sees a request finish has
		// already been told which blocks it left in the cache.
		if len(res.Events) > 0 && !rk.srv.cfg.NoKVEvents {
			rk.mu.Lock()
			rk.seq++
			seq := rk.seq
			rk.mu.Unlock()
			rk.srv.srv.Broadcast(&wire.KVEvents{Seq: seq, TimestampNano: time.Now().UnixNano(), DPRank: uint16(rk.id), Events: wireEvents(res.Events)})
		}
		rk.srv.deliver(res.Outputs)
	}
}

// serveSnapshots answers queued snapshot requests; rk.mu is held.
func (rk *rank) serveSnapshots() {
	if len(rk.snaps) == 0 {
		return
	}
	evs := wireEvents(rk.core.Snapshot())
	for _, req := range rk.snaps {
		var frames []wire.Message
		chunk := uint32(0)
		for start := 0; ; {
			end, n := start, 0
			for end < len(evs) && n < snapshotChunkBlocks {
				n += evs[end].Hashes.Len()
				end++
			}
			m := &wire.Snapshot{SnapshotID: req.id, Chunk: chunk, Last: end == len(evs), Seq: rk.seq, DPRank: uint16(rk.id), Events: evs[start:end]}
			frames = append(frames, m)
			if m.Last {
				break
			}
			start, chunk = end, chunk+1
		}
		_ = rk.srv.srv.SendTo(req.conn, frames...)
	}
	rk.snaps = nil
}

// snapshotChunkBlocks keeps every SNAPSHOT frame far below the frame limit.
const snapshotChunkBlocks = 1 << 16

func wireEvents(evs []kvstore.Event) []wire.Event {
	out := make([]wire.Event, len(evs))
	for i, ev := range evs {
		out[i] = wire.Event{Kind: wire.EventKind(ev.Kind), Tier: wire.Tier(ev.Tier), Group: ev.Group, HasParent: ev.HasParent,
			Parent: ev.Parent, Hashes: wire.HashesOf(ev.Hashes)}
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
