package syncring

import (
	"slices"
	"testing"
	"time"
)

// TestRoundStateMachine drives one replica's loop by hand as the middle of
// a three-member ring (a, b, c): it plays a's chunks exactly as a ring
// all-reduce would deliver them and checks what b sends to c, the view
// after the round, and that a round cut short by a peer's death is
// abandoned with the previous view kept.
func TestRoundStateMachine(t *testing.T) {
	engines := []string{"x:1", "y:1"} // vector: 2 engines x 3 + 3 member slots = 9 values, chunks of 3
	src := &source{loads: []Load{{PrefillTokens: 10, DecodeTokens: 20, Requests: 1}, {PrefillTokens: 30, DecodeTokens: 40, Requests: 2}}}
	cfg := DefaultConfig()
	cfg.ID, cfg.Engines, cfg.Source = "b", engines, src
	r, err := newRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src.ring = r
	s := &r.loop
	links := map[string]*link{}
	for _, id := range []string{"a", "c"} {
		links[id] = &link{id: id, q: make(chan []byte, 64), closed: make(chan struct{})}
		s.linkUp(links[id])
		p := s.peers[id]
		p.hbSeen, p.heard = true, time.Now()
		p.hb = heartbeat{Incarnation: 7, EngineKeys: s.local, Hears: []string{"a", "b", "c"}}
	}
	s.reform()
	if !slices.Equal(s.members, []string{"a", "b", "c"}) || s.rank != 1 {
		t.Fatalf("members %v rank %d", s.members, s.rank)
	}
	drain(links["c"]) // heartbeats

	// The three replicas' vectors; b's is its source plus its snapshot
	// number (1, the first) in its slot.
	A := []int64{1, 2, 3, 4, 5, 6, 9, 0, 0}
	B := []int64{10, 20, 1, 30, 40, 2, 0, 1, 0}
	C := []int64{100, 200, 300, 400, 500, 600, 0, 0, 5}
	full := make([]int64, 9)
	for i := range full {
		full[i] = A[i] + B[i] + C[i]
	}
	sum := func(xs ...[]int64) []int64 {
		out := make([]int64, 3)
		for _, x := range xs {
			for i := range out {
				out[i] += x[i]
			}
		}
		return out
	}
	chunkOf := func(v []int64, c int) []int64 { return v[3*c : 3*c+3] }

	// Reduce-scatter step 0: a's chunk 0 makes b start the round: b sends
	// its own chunk 1 (step 0), then a0+b0 (step 1).
	s.chunk("a", &chunk{Round: 1, Phase: phaseReduceScatter, Step: 0, Index: 0, Values: chunkOf(A, 0)})
	got := sent(t, links["c"], 2)
	want(t, got[0], 1, phaseReduceScatter, 0, 1, chunkOf(B, 1))
	want(t, got[1], 1, phaseReduceScatter, 1, 0, sum(chunkOf(A, 0), chunkOf(B, 0)))
	// Step 1: chunk 2 arrives holding a2+c2; b completes it and starts the
	// all-gather with it.
	s.chunk("a", &chunk{Round: 1, Phase: phaseReduceScatter, Step: 1, Index: 2, Values: sum(chunkOf(A, 2), chunkOf(C, 2))})
	want(t, sent(t, links["c"], 1)[0], 1, phaseAllGather, 0, 2, chunkOf(full, 2))
	// All-gather: the full chunks 1 then 0 arrive; b passes chunk 1 on.
	s.chunk("a", &chunk{Round: 1, Phase: phaseAllGather, Step: 0, Index: 1, Values: chunkOf(full, 1)})
	want(t, sent(t, links["c"], 1)[0], 1, phaseAllGather, 1, 1, chunkOf(full, 1))
	s.chunk("a", &chunk{Round: 1, Phase: phaseAllGather, Step: 1, Index: 0, Values: chunkOf(full, 0)})
	if s.round != nil || s.done != 1 {
		t.Fatalf("round not complete: done %d", s.done)
	}
	peers := r.PeerLoad()
	if peers[0] != (Load{PrefillTokens: 101, DecodeTokens: 202, Requests: 303}) || peers[1] != (Load{PrefillTokens: 404, DecodeTokens: 505, Requests: 606}) {
		t.Fatalf("peer load after the round: %+v", peers)
	}

	// Out of turn: a chunk from c (not b's predecessor), a wrong step.
	before := r.metrics.ignored.Load()
	s.chunk("c", &chunk{Round: 2, Phase: phaseReduceScatter, Step: 0, Index: 2, Values: chunkOf(C, 2)})
	s.chunk("a", &chunk{Round: 2, Phase: phaseReduceScatter, Step: 0, Index: 0, Values: chunkOf(A, 0)})
	drain(links["c"])
	s.chunk("a", &chunk{Round: 2, Phase: phaseReduceScatter, Step: 0, Index: 0, Values: chunkOf(A, 0)})
	if r.metrics.ignored.Load() != before+2 {
		t.Fatalf("ignored %d, want 2 more", r.metrics.ignored.Load()-before)
	}

	// a dies mid-round 2: the ring re-forms without it, the round is
	// abandoned and the last completed view stays.
	s.peers["a"].heard = time.Now().Add(-time.Hour)
	s.reform()
	if s.round != nil || s.abandoned != 1 || !slices.Equal(s.members, []string{"b", "c"}) {
		t.Fatalf("after a died: round %v abandoned %d members %v", s.round, s.abandoned, s.members)
	}
	if got := r.PeerLoad(); !slices.Equal(got, peers) {
		t.Fatalf("view changed by an abandoned round: %+v", got)
	}
}

func drain(l *link) {
	for {
		select {
		case <-l.q:
		default:
			return
		}
	}
}

// sent decodes the next n chunks queued on l (delta state as a receiver
// would keep it), skipping other messages.
func sent(t *testing.T, l *link, n int) []chunk {
	t.Helper()
	var out []chunk
	for len(out) < n {
		select {
		case b := <-l.q:
			var m message
			if err := decodeMessage(b, &m, func(c *chunk, n int) []int64 { return recvState(l).base(deltaKey{c.Phase, c.Index}, n) }); err != nil {
				t.Fatal(err)
			}
			if m.Kind == kindChunk {
				recvState(l).remember(deltaKey{m.Chunk.Phase, m.Chunk.Index}, m.Chunk.Values)
				out = append(out, m.Chunk)
			}
		default:
			t.Fatalf("%d chunks sent to %s, want %d", len(out), l.id, n)
		}
	}
	return out
}

var recvStates = map[*link]*deltaState{}

func recvState(l *link) *deltaState {
	if recvStates[l] == nil {
		recvStates[l] = &deltaState{}
	}
	return recvStates[l]
}

func want(t *testing.T, c chunk, round uint64, phase uint8, step, index int, values []int64) {
	t.Helper()
	if c.Round != round || c.Phase != phase || int(c.Step) != step || int(c.Index) != index || !slices.Equal(c.Values, values) {
		t.Fatalf("sent round %d phase %d step %d chunk %d %v; want round %d phase %d step %d chunk %d %v",
			c.Round, c.Phase, c.Step, c.Index, c.Values, round, phase, step, index, values)
	}
}
