package engine

import (
	"slices"
	"testing"

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

// testDelivery is a read loop's delivery on an engine with one open
// stream, id 1.
func testDelivery() (*delivery, *Stream) {
	e := &Engine{streams: make(map[uint32]*Stream)}
	s := &Stream{e: e, id: 1, ready: make(chan struct{}, 1)}
	e.streams[s.id] = s
	return newDelivery(e), s
}

// woken reports whether s's consumer has been signalled, taking the signal.
func woken(s *Stream) bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// TestStreamFrameAllocs: a consumer that releases what it took lets the
// next frames decode into the same arrays, and a read loop that delivers
// them allocates nothing per frame.
func TestStreamFrameAllocs(t *testing.T) {
	d, s := testDelivery()
	m := &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{7, 8, 9, 10})}
	cycle := func() {
		d.tokens(s.id, m)
		d.tokens(s.id, m)
		d.flush()
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

// TestDeliveryWakesOncePerRead: the frames of one read wake their stream's
// consumer once, at the flush before the next read, and a stream closed
// meanwhile (abandon) takes no more frames though the read loop cached it.
func TestDeliveryWakesOncePerRead(t *testing.T) {
	d, s := testDelivery()
	plain := &wire.TokensMsg{Tokens: wire.TokensOf([]uint32{1, 2})}
	d.tokens(s.id, &wire.TokensMsg{Flags: wire.TokFirst, Tokens: wire.TokensOf([]uint32{0})})
	d.tokens(s.id, plain)
	if woken(s) {
		t.Fatal("the consumer was woken before the read loop's next read")
	}
	if len(d.wakes) != 1 {
		t.Fatalf("%d wakes queued for one stream", len(d.wakes))
	}
	d.flush()
	if !woken(s) || woken(s) {
		t.Fatal("want exactly one wake after the flush")
	}
	d.flush()
	if woken(s) {
		t.Fatal("a flush with nothing delivered woke the consumer")
	}
	var ids []uint32
	for _, ev := range s.Take() {
		ids = append(ids, ev.Tokens...)
	}
	if !slices.Equal(ids, []uint32{0, 1, 2}) {
		t.Fatalf("ids %v, want [0 1 2]", ids)
	}

	s.e.mu.Lock() // what abandon does, without a connection to send CANCEL on
	s.closed.Store(true)
	s.e.mu.Unlock()
	s.push(Event{Last: true, Err: ErrEngineDown})
	evs := s.Take()
	if len(evs) != 1 || !evs[0].Last || evs[0].Err == nil {
		t.Fatalf("after abandon: %+v, want the error's last event", evs)
	}
	d.tokens(s.id, plain)
	d.flush()
	if evs := s.Take(); len(evs) != 0 {
		t.Fatalf("an abandoned stream took a frame: %+v", evs)
	}
	d.tokens(s.id, &wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishStop})
	if len(d.live) != 0 || s.e.OpenStreams() != 0 {
		t.Fatalf("the engine's end left the stream cached (%d) or in the table (%d)", len(d.live), s.e.OpenStreams())
	}
}

// TestStreamEndBeforeViolation: a stream's last frame and a frame that
// breaks the protocol arrive in one read; the read loop ends on the second
// with the first's wake still queued, and the consumer gets its end all
// the same (readLoop flushes on its way out).
func TestStreamEndBeforeViolation(t *testing.T) {
	_, _, e, c := ttConnected(t)
	s, _ := ttOpen(t, e, c)
	b, err := wire.AppendFrame(nil, s.id, &wire.TokensMsg{Flags: wire.TokFirst, Tokens: wire.TokensOf([]uint32{1, 2})})
	if err == nil {
		b, err = wire.AppendFrame(b, s.id, &wire.TokensMsg{Flags: wire.TokLast, Finish: wire.FinishStop, Tokens: wire.TokensOf([]uint32{3})})
	}
	if err != nil {
		t.Fatal(err)
	}
	b = wire.AppendHeader(b, wire.Type(0x7f), 0, 0, 0) // no such frame type
	if _, err := c.NetConn.Write(b); err != nil {
		t.Fatal(err)
	}
	evs := ttCollect(t, s)
	if last := evs[len(evs)-1]; last.Err != nil || last.Finish != wire.FinishStop || !slices.Equal(ttTokens(evs), []uint32{1, 2, 3}) {
		t.Fatalf("events %+v, want tokens 1 2 3 and the engine's stop", evs)
	}
}
