package engine

// KV events and snapshots from the engine's read loop into the shared
// index (PROTOCOL.md 6.3): sequence gaps ask for a snapshot, a snapshot's
// frames are gathered per rank and replace the rank's slot at once.

import (
	"slices"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// applyEvents applies an EVENTS frame to the rank's slot, after asking for
// a snapshot when its sequence number skips one.
func (e *Engine) applyEvents(m *wire.KVEvents) {
	slot, ok := e.rankSlot(m.DPRank)
	if !ok {
		return
	}
	if last := e.lastSeq[m.DPRank]; last != 0 && m.Seq != last+1 {
		e.log.Warn("KV event gap: asking for a snapshot", "engine", e.Addr, "rank", m.DPRank, "after", last, "got", m.Seq)
		e.mu.Lock()
		c := e.conn
		e.mu.Unlock()
		_ = c.Send(0, &wire.SnapshotRequest{SnapshotID: uint32(m.Seq)})
	}
	e.lastSeq[m.DPRank] = m.Seq
	evs := e.events.convert(m.Events, e.profile().groups != nil)
	if err := e.pool.index.Apply(slot, evs); err != nil {
		e.log.Warn("applying KV events", "engine", e.Addr, "err", err)
	}
	e.events.release()
	e.pool.metrics.eventsApplied.Add(uint64(len(m.Events)))
}

// applySnapshot gathers a SNAPSHOT frame; the rank's last one replaces
// its slot with them all.
func (e *Engine) applySnapshot(m *wire.Snapshot) {
	e.snapshots[m.DPRank] = append(e.snapshots[m.DPRank], convertEvents(m.Events, e.profile().groups != nil)...)
	if !m.Last {
		return
	}
	slot, ok := e.rankSlot(m.DPRank)
	if ok {
		if err := e.pool.index.Replace(slot, e.snapshots[m.DPRank]); err != nil {
			e.log.Warn("applying snapshot", "engine", e.Addr, "err", err)
		}
		e.lastSeq[m.DPRank] = m.Seq
	}
	delete(e.snapshots, m.DPRank)
	if e.snapAwait > 0 {
		if e.snapAwait--; e.snapAwait == 0 {
			e.admit("snapshot applied")
		}
	}
}

// convertEvents copies wire events (views into the read buffer) into
// kvstore events. groups says the engine's groups are indexed apart; when
// they are not (an engine with one cache, or a group-blind pool) every
// event is taken as group 0, as routers from before groups took them.
func convertEvents(evs []wire.Event, groups bool) []kvstore.Event {
	out := make([]kvstore.Event, len(evs))
	for i, ev := range evs {
		out[i] = convertEvent(ev, groups, ev.Hashes.AppendTo(make([]uint64, 0, ev.Hashes.Len())))
	}
	return out
}

// convertEvent is ev as a kvstore event whose hashes are hashes.
func convertEvent(ev wire.Event, groups bool, hashes []uint64) kvstore.Event {
	out := kvstore.Event{Kind: kvstore.EventKind(ev.Kind), Tier: kvstore.Tier(ev.Tier), HasParent: ev.HasParent,
		Parent: ev.Parent, Hashes: hashes}
	if groups {
		out.Group = ev.Group
	}
	return out
}

// kvScratch is room for converted events that are used and dropped before
// the next frame's (Index.Apply keeps none of them). Room grown past
// maxKeptHashes (a frame far larger than a step's, such as a burst of
// evictions) is let go after use rather than held for the engine's life.
type kvScratch struct {
	events []kvstore.Event
	hashes []uint64
}

// maxKeptHashes is the most hashes a kvScratch keeps room for: 512 KB.
const maxKeptHashes = 64 << 10

// convert is convertEvents into s's room, valid until s.release.
func (s *kvScratch) convert(evs []wire.Event, groups bool) []kvstore.Event {
	n := 0
	for _, ev := range evs {
		n += ev.Hashes.Len()
	}
	s.events = slices.Grow(s.events[:0], len(evs))
	s.hashes = slices.Grow(s.hashes[:0], n) // one array: no event's view moves
	for _, ev := range evs {
		at := len(s.hashes)
		s.hashes = ev.Hashes.AppendTo(s.hashes)
		s.events = append(s.events, convertEvent(ev, groups, s.hashes[at:len(s.hashes):len(s.hashes)]))
	}
	return s.events
}

// release drops what convert gave: the events' views, and room too
// large to keep.
func (s *kvScratch) release() {
	clear(s.events)
	s.events = s.events[:0]
	if cap(s.hashes) > maxKeptHashes {
		s.hashes = nil
	}
	if cap(s.events) > maxKeptHashes {
		s.events = nil
	}
}
