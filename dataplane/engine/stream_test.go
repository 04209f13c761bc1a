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
