package syncring

import (
	"time"
)

// round is one ring all-reduce in progress. The vector holds, per engine,
// (prefill, decode, requests), then one slot per member where each puts the
// number of its own-load snapshot (so the sum tells every replica which
// broadcast reservations the round already includes). It is cut into N
// chunks; reduce-scatter takes N-1 steps (at step s member k sends chunk
// k-s and adds chunk k-s-1 from its predecessor), after which member k
// holds the sum of chunk k+1; all-gather takes N-1 more steps passing the
// summed chunks on. Each member sends 2(N-1) chunks per round: 2(N-1)/N of
// the vector, however large N.
type round struct {
	id      uint64
	acc     []int64 // the vector, summed in place
	own     []int64 // this replica's snapshot
	phase   uint8
	step    int // the step whose chunk is awaited from the predecessor
	started time.Time
	bytes   int
}

// chunkBounds is chunk c's half-open range in a vector of length n cut in parts.
func chunkBounds(c, parts, n int) (lo, hi int) {
	return c * n / parts, (c + 1) * n / parts
}

func mod(a, n int) int { return ((a % n) + n) % n }

func (s *loopState) leader() bool { return s.rank == 0 }

// tick is the round clock: the leader starts a round every interval when
// none is running, and any member gives up a round past RoundTimeout.
func (s *loopState) tick() {
	if len(s.members) < 2 {
		return
	}
	if s.round != nil && time.Since(s.round.started) > s.r.cfg.RoundTimeout {
		s.abandon()
	}
	if s.leader() && s.round == nil {
		s.start(s.lastRound + 1)
	}
}

// start snapshots this replica's own load and sends its first chunk.
func (s *loopState) start(id uint64) {
	n := len(s.members)
	e := len(s.order)
	size := loadValues*e + n
	rd := &round{id: id, acc: make([]int64, size), started: time.Now()}
	var snap uint64
	clear(s.own)
	s.r.cfg.Source.ReadLoad(s.own, func() { snap = s.r.snap.Add(1) })
	for k, ci := range s.order {
		l := s.own[ci]
		rd.acc[k*loadValues], rd.acc[k*loadValues+1], rd.acc[k*loadValues+2] = l.PrefillTokens, l.DecodeTokens, l.Requests
	}
	rd.acc[loadValues*e+s.rank] = int64(snap)
	rd.own = append([]int64(nil), rd.acc...)
	s.round, s.lastRound = rd, id
	s.sendChunk(phaseReduceScatter, 0, s.rank)
}

// sendChunk sends chunk c of the round's vector to the successor.
func (s *loopState) sendChunk(phase uint8, step, c int) {
	rd, n := s.round, len(s.members)
	succ := s.peers[s.members[mod(s.rank+1, n)]]
	if succ == nil || succ.link == nil {
		return // the round will time out; membership catches up
	}
	lo, hi := chunkBounds(c, n, len(rd.acc))
	ch := chunk{Round: rd.id, Phase: phase, Step: uint16(step), Index: uint16(c), Values: rd.acc[lo:hi]}
	k := deltaKey{phase: phase, index: uint16(c)}
	body := appendChunk(nil, s.epoch, &ch, succ.link.send.base(k, hi-lo))
	succ.link.send.remember(k, ch.Values)
	if s.send(succ.link, body) {
		rd.bytes += len(body) + 12
	}
}

// chunk handles a chunk from a member: only the predecessor's, for the
// current round (or a newer one, which starts here) at the awaited step.
func (s *loopState) chunk(from string, c *chunk) {
	n := len(s.members)
	if n < 2 || from != s.members[mod(s.rank-1, n)] {
		s.r.metrics.ignored.Add(1)
		return
	}
	if s.round == nil || c.Round > s.round.id {
		if c.Round <= s.lastRound && s.round == nil {
			s.r.metrics.ignored.Add(1) // a late chunk of a round given up
			return
		}
		if s.round != nil {
			s.abandon()
		}
		s.start(c.Round)
	}
	rd := s.round
	want := s.expected(rd)
	if c.Round != rd.id || c.Phase != rd.phase || int(c.Step) != rd.step || int(c.Index) != want {
		s.r.metrics.ignored.Add(1)
		return
	}
	lo, hi := chunkBounds(want, n, len(rd.acc))
	if len(c.Values) != hi-lo {
		s.r.metrics.ignored.Add(1)
		return
	}
	dst := rd.acc[lo:hi]
	if rd.phase == phaseReduceScatter {
		for i, v := range c.Values {
			dst[i] += v
		}
	} else {
		copy(dst, c.Values)
	}
	switch {
	case rd.step < n-2:
		rd.step++
		s.sendChunk(rd.phase, rd.step, want)
	case rd.phase == phaseReduceScatter:
		rd.phase, rd.step = phaseAllGather, 0
		s.sendChunk(phaseAllGather, 0, mod(s.rank+1, n))
	default:
		s.complete()
	}
}

// expected is the chunk index awaited at the round's step.
func (s *loopState) expected(rd *round) int {
	n := len(s.members)
	if rd.phase == phaseReduceScatter {
		return mod(s.rank-rd.step-1, n)
	}
	return mod(s.rank-rd.step, n)
}

// complete takes the reduced vector: the peers' load is the sum less this
// replica's own snapshot, and every broadcast reservation that a peer's
// snapshot already counts leaves the pending set.
func (s *loopState) complete() {
	rd := s.round
	e := len(s.order)
	s.total = 0
	for i := range loadValues * e {
		s.contrib[i] = rd.acc[i] - rd.own[i]
		if i%loadValues != 2 {
			s.total += rd.acc[i]
		}
	}
	for rank, id := range s.members {
		if id != s.r.cfg.ID {
			s.dropPending(s.peers[id], uint64(rd.acc[loadValues*e+rank]))
		}
	}
	s.done++
	s.lastMicros = uint32(min(time.Since(rd.started).Microseconds(), 1<<32-1))
	s.lastBytes = uint32(rd.bytes)
	s.bytesTotal += uint64(rd.bytes)
	s.round = nil
	s.publishView()
}

// abandon gives up the round in progress; the last completed view stays.
func (s *loopState) abandon() {
	if s.round != nil {
		s.round = nil
		s.abandoned++
	}
}
