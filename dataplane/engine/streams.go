package engine

import "sync/atomic"

// The stream table: which Stream each stream id of the connection names.
// The read loop looks a stream up for every TOKENS frame, a lock and a map
// lookup each under Engine.mu until this table; now it reads the table
// without a lock, and only changes to the table take Engine.mu.
//
// The table is an array of slots, a power of two long, and stream id i lives
// in slot i&mask. Generate gives out ids by counting up (PROTOCOL.md
// section 5), skipping 0 and every id whose slot holds a stream: an open one
// (its id is not reused until the engine ends it, abandoned streams
// included), or another id's. The table doubles before it is half full, so
// the skipping stays short.
//
// Why the read loop may read it without Engine.mu:
//   - Slots and the table pointer are atomics: the read loop sees a stream
//     whole or not at all. A slot holding a stream of another id (an id
//     ended before, or one skipped over) reads as no stream: the slot's
//     stream's id is checked.
//   - Generate stores a stream in the table before it sends its GENERATE,
//     and the engine sends nothing on the id before it reads that GENERATE,
//     so a frame for the stream reaches the read loop after the store.
//     A grown table holds every stream of the old one before it is
//     published, and only Engine.mu's holders write either.
//   - Only the read loop removes a stream the engine has ended (its last
//     frame or stream ERROR); the other removals are Generate's own stream
//     (its GENERATE unsent) and failStreams and adopt, once the read loop
//     has returned.
//   - Stream.closed (abandon's "ended for the consumer") is an atomic the
//     read loop checks for each frame; abandon's last event may thus be
//     queued just before a frame the read loop had already looked up, as it
//     could be with the lock: events after the last one are never taken.
type streamTable struct {
	slots []atomic.Pointer[Stream]
	mask  uint32
	open  int // streams in the table; under Engine.mu
}

// streamTableMin is a new table's size.
const streamTableMin = 64

func newStreamTable(size int) *streamTable {
	return &streamTable{slots: make([]atomic.Pointer[Stream], size), mask: uint32(size - 1)}
}

// lookup returns stream id, or nil: the read loop's per-frame lookup, with
// no lock.
func (t *streamTable) lookup(id uint32) *Stream {
	if s := t.slots[id&t.mask].Load(); s != nil && s.id == id {
		return s
	}
	return nil
}

// remove takes s out of the table, with Engine.mu held.
func (t *streamTable) remove(s *Stream) {
	if t.slots[s.id&t.mask].CompareAndSwap(s, nil) {
		t.open--
	}
}

// each calls f for every stream in the table, with Engine.mu held.
func (t *streamTable) each(f func(*Stream)) {
	for i := range t.slots {
		if s := t.slots[i].Load(); s != nil {
			f(s)
		}
	}
}

// table returns the engine's stream table.
func (e *Engine) table() *streamTable { return e.streams.Load() }

// newStream gives a new stream the next free id and puts it in the table,
// with Engine.mu held. It grows the table first when it is half full.
func (e *Engine) newStream() *Stream {
	t := e.table()
	if 2*(t.open+1) > len(t.slots) {
		bigger := newStreamTable(2 * len(t.slots))
		t.each(func(s *Stream) { bigger.slots[s.id&bigger.mask].Store(s) })
		bigger.open = t.open
		e.streams.Store(bigger)
		t = bigger
	}
	for {
		e.nextStream++
		if e.nextStream != 0 && t.slots[e.nextStream&t.mask].Load() == nil {
			break
		}
	}
	s := &Stream{e: e, id: e.nextStream, ready: make(chan struct{}, 1)}
	t.slots[s.id&t.mask].Store(s)
	t.open++
	return s
}
