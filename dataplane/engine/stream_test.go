package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

func newTestStream() *Stream { return &Stream{ready: make(chan struct{}, 1)} }

// TestStreamFramesMerge: plain frames join the event before them, first
// and last frames start their own, and the ids keep their order whether
// the consumer takes after each frame or after all of them.
func TestStreamFramesMerge(t *testing.T) {
	frames := []*wire.TokensMsg{
		{Flags: wire.TokFirst, CachedTokens: 16, Tokens: wire.TokensOf([]uint32{1})},
		{Tokens: wire.TokensOf([]uint32{2, 3})},
		{Tokens: wire.TokensOf([]uint32{4})},
		{Flags: wire.TokLast, Finish: wire.FinishLength, PromptTokens: 9, CompletionTokens: 5, Tokens: wire.TokensOf([]uint32{5})},
	}
	for _, every := range []int{1, 2, len(frames)} {
		s := newTestStream()
		var ids []uint32
		var kinds []string
		for i, m := range frames {
			s.pushFrame(m)
			if (i+1)%every != 0 && i != len(frames)-1 {
				continue
			}
			evs := s.Take()
			for _, ev := range evs {
				ids = append(ids, ev.Tokens...)
				switch {
				case ev.First:
					kinds = append(kinds, "first")
				case ev.Last:
					kinds = append(kinds, "last")
				default:
					kinds = append(kinds, "plain")
				}
			}
			s.Release(evs)
		}
		if !slices.Equal(ids, []uint32{1, 2, 3, 4, 5}) || kinds[0] != "first" || kinds[len(kinds)-1] != "last" {
			t.Fatalf("taking every %d frames: ids %v, events %v", every, ids, kinds)
		}
		if every == len(frames) && len(kinds) != 2 { // the plain frames joined the first's event
			t.Fatalf("all at once: events %v, want first and last", kinds)
		}
	}
}

// TestStreamFrameAllocs: a consumer that releases what it took lets the
// next frames decode into the same arrays.
func TestStreamFrameAllocs(t *testing.T) {
	s := newTestStream()
	m := &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{7, 8, 9, 10})}
	cycle := func() {
		s.pushFrame(m)
		s.pushFrame(m)
		evs := s.Take()
		if len(evs) != 1 || len(evs[0].Tokens) != 8 {
			t.Fatalf("events %+v", evs)
		}
		s.Release(evs)
		<-s.ready
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Fatalf("%v allocations per frame pair", n)
	}
}

// recordSink is a Sink that records the ids delivered to it, ending after
// stopAfter of them (0: never).
type recordSink struct {
	ids       []uint32
	stopAfter int
	calls     int
}

func (r *recordSink) Deliver(ev *Event) bool {
	r.calls++
	r.ids = append(r.ids, ev.Tokens...)
	return r.stopAfter == 0 || len(r.ids) < r.stopAfter
}

// push is the read loop for s: it queues m, and joins the batch when the
// stream asks to.
func (b *sinkBatch) push(s *Stream, m *wire.TokensMsg) {
	if s.pushFrame(m) {
		b.streams = append(b.streams, s)
	}
}

// TestSinkKeepsOrder: with a sink attached, plain frames wait for the
// batch's flush and go to the sink, merged, unless the consumer holds what
// it took or the queue holds a first or last event: then the consumer
// takes them. Every id arrives once, in order.
func TestSinkKeepsOrder(t *testing.T) {
	frames := []*wire.TokensMsg{
		{Flags: wire.TokFirst, Tokens: wire.TokensOf([]uint32{1})},
		{Tokens: wire.TokensOf([]uint32{2, 3})},
		{Tokens: wire.TokensOf([]uint32{4})},
		{Tokens: wire.TokensOf([]uint32{5})},
		{Tokens: wire.TokensOf([]uint32{6})},
		{Flags: wire.TokLast, Tokens: wire.TokensOf([]uint32{7})},
	}
	for _, tc := range []struct {
		name      string
		takeAfter map[int]bool // the consumer takes (and releases) after these frames
		holdOver  int          // the frame pushed while the consumer holds a Take (-1: none)
		flushAt   map[int]bool // the read loop flushes after these frames
		wantCalls int          // deliveries to the sink
	}{
		{"flush every frame", map[int]bool{0: true, 5: true}, -1, map[int]bool{1: true, 2: true, 3: true, 4: true}, 4},
		{"flush two reads", map[int]bool{0: true, 5: true}, -1, map[int]bool{2: true, 4: true}, 2},
		{"first not yet taken", map[int]bool{2: true, 5: true}, -1, map[int]bool{1: true, 3: true, 4: true}, 2},
		{"held over a frame", map[int]bool{3: true, 5: true}, 1, map[int]bool{1: true, 2: true}, 0},
		{"never flushed", map[int]bool{0: true, 5: true}, -1, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStream()
			sink := &recordSink{}
			s.Attach(sink)
			b := &sinkBatch{}
			var got []uint32
			take := func() []Event {
				got = append(got, sink.ids...) // what the sink took came before what is queued now
				sink.ids = nil
				evs := s.Take()
				for _, ev := range evs {
					got = append(got, ev.Tokens...)
				}
				return evs
			}
			for i, m := range frames {
				var held []Event
				if i == tc.holdOver {
					held = take()
				}
				b.push(s, m)
				if tc.flushAt[i] {
					b.flush()
				}
				if i == tc.holdOver {
					s.Release(held)
				}
				if tc.takeAfter[i] {
					s.Release(take())
				}
			}
			if !slices.Equal(got, []uint32{1, 2, 3, 4, 5, 6, 7}) {
				t.Fatalf("ids %v", got)
			}
			if sink.calls != tc.wantCalls {
				t.Fatalf("sink took %d events, want %d", sink.calls, tc.wantCalls)
			}
			if s.Detach() {
				t.Fatal("SinkEnded without the sink ending")
			}
		})
	}
}

// TestSinkEnds: a sink that returns false gets nothing more, Ready is
// signalled and SinkEnded reports it; later frames queue for Take.
func TestSinkEnds(t *testing.T) {
	s := newTestStream()
	sink := &recordSink{stopAfter: 2}
	s.Attach(sink)
	b := &sinkBatch{}
	for _, id := range []uint32{1, 2, 3} {
		b.push(s, &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{id})})
		b.flush()
	}
	select {
	case <-s.Ready():
	default:
		t.Fatal("Ready not signalled when the sink ended")
	}
	if !s.SinkEnded() || !slices.Equal(sink.ids, []uint32{1, 2}) {
		t.Fatalf("ended %v, sink ids %v", s.SinkEnded(), sink.ids)
	}
	if evs := s.Take(); len(evs) != 1 || !slices.Equal(evs[0].Tokens, []uint32{3}) {
		t.Fatalf("queued after the end: %+v", evs)
	}
	if !s.Detach() {
		t.Fatal("Detach does not report the sink's end")
	}
}

// TestSinkTakesNoLargeEvent: an event over sinkMaxTokens (a read loop far
// behind) wakes the consumer instead.
func TestSinkTakesNoLargeEvent(t *testing.T) {
	s := newTestStream()
	sink := &recordSink{}
	s.Attach(sink)
	b := &sinkBatch{}
	ids := make([]uint32, sinkMaxTokens)
	b.push(s, &wire.TokensMsg{Tokens: wire.TokensOf(ids)})
	b.push(s, &wire.TokensMsg{Tokens: wire.TokensOf(ids[:1])})
	b.flush()
	if sink.calls != 0 {
		t.Fatalf("the sink took %d ids", len(sink.ids))
	}
	if evs := s.Take(); len(evs) != 1 || len(evs[0].Tokens) != sinkMaxTokens+1 {
		t.Fatalf("the consumer took %+v", evs)
	}
}

// blockingSink holds its delivery until release closes.
type blockingSink struct{ entered, release chan struct{} }

func (b *blockingSink) Deliver(*Event) bool {
	close(b.entered)
	<-b.release
	return true
}

// TestDetachWaitsForDelivery: Detach returns only once a delivery in
// progress has, and Take returns nothing meanwhile.
func TestDetachWaitsForDelivery(t *testing.T) {
	s := newTestStream()
	bs := &blockingSink{entered: make(chan struct{}), release: make(chan struct{})}
	s.Attach(bs)
	b := &sinkBatch{}
	b.push(s, &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{1})})
	go b.flush()
	<-bs.entered
	s.push(Event{Last: true}) // from another goroutine while the sink runs
	if evs := s.Take(); evs != nil {
		t.Fatalf("Take during a delivery: %+v", evs)
	}
	detached := make(chan struct{})
	go func() { s.Detach(); close(detached) }()
	select {
	case <-detached:
		t.Fatal("Detach returned during a delivery")
	case <-time.After(20 * time.Millisecond): // not a timing assertion: failing needs Detach to return early
	}
	close(bs.release)
	<-detached
	if evs := s.Take(); len(evs) != 1 || !evs[0].Last {
		t.Fatalf("after the delivery: %+v", evs)
	}
}

// TestSinkFrameAllocs: frames a sink takes cost no allocation once the
// stream's arrays have grown.
func TestSinkFrameAllocs(t *testing.T) {
	s := newTestStream()
	c := &countSink{}
	s.Attach(c)
	b := &sinkBatch{}
	m := &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{7, 8, 9, 10})}
	cycle := func() {
		b.push(s, m)
		b.push(s, m)
		b.flush()
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Fatalf("%v allocations per frame pair", n)
	}
	if c.n != 102*8 { // AllocsPerRun runs cycle once more to warm up
		t.Fatalf("the sink took %d ids, want %d", c.n, 102*8)
	}
}

type countSink struct{ n int }

func (c *countSink) Deliver(ev *Event) bool { c.n += len(ev.Tokens); return true }
