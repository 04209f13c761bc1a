package engine

import (
	"math"
	"testing"
)

// TestStreamTable: ids count up, skipping 0 and ids whose slot is taken;
// the table grows before it is half full and keeps every stream; a stream
// ends only when removed, its id not given out again while it is open, and
// a slot holding another id reads as no stream.
func TestStreamTable(t *testing.T) {
	e := &Engine{}
	e.streams.Store(newStreamTable(streamTableMin))
	e.nextStream = math.MaxUint32 - 2 // the counter wraps past 0 on the way
	open := map[uint32]*Stream{}
	add := func() *Stream {
		e.mu.Lock()
		defer e.mu.Unlock()
		s := e.newStream()
		if s.id == 0 || open[s.id] != nil {
			t.Fatalf("id %d given out while open (or 0)", s.id)
		}
		open[s.id] = s
		return s
	}
	remove := func(s *Stream) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.table().remove(s)
		delete(open, s.id)
	}
	check := func(when string) {
		t.Helper()
		tbl := e.table()
		if tbl.open != len(open) || 2*tbl.open > len(tbl.slots) {
			t.Fatalf("%s: table of %d slots counts %d streams, %d open", when, len(tbl.slots), tbl.open, len(open))
		}
		for id, s := range open {
			if got := tbl.lookup(id); got != s {
				t.Fatalf("%s: stream %d looks up as %p, want %p", when, id, got, s)
			}
		}
	}
	long := add() // open throughout: its slot is skipped each time the counter comes round
	var batch []*Stream
	for range 1000 {
		batch = append(batch, add())
	}
	check("after 1,001 streams")
	for _, s := range batch {
		remove(s)
		if e.table().lookup(s.id) != nil {
			t.Fatalf("stream %d found after its removal", s.id)
		}
	}
	check("after removing 1,000")
	size := len(e.table().slots)
	for range 10 * size { // the counter passes long's slot ten times
		remove(add())
	}
	check("after the counter came round")
	if len(e.table().slots) != size {
		t.Fatalf("the table grew from %d to %d slots with 2 streams open", size, len(e.table().slots))
	}
	if e.table().lookup(long.id+uint32(size)) != nil { // long's slot, another id
		t.Fatalf("id %d found in stream %d's slot", long.id+uint32(size), long.id)
	}
}
