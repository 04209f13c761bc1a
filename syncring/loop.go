package syncring

import (
	"slices"
	"time"
)

// loopState is everything the ring loop owns.
type loopState struct {
	r *Ring
	// keys are the caller's engine keys by position, local their sorted
	// distinct set, shared the epoch's vector keys (engines.go); order maps
	// a vector position to the caller's position.
	keys, local, shared []string
	order               []int
	peers               map[string]*peer
	members             []string // sorted, this replica included
	rank                int
	epoch               uint64
	// epochNum counts this replica's epochs (for operators; not on the wire
	// as an identity).
	epochNum  uint64
	round     *round
	lastRound uint64
	// contrib is the peers' load from the last completed round and
	// pendingSum their reservations since, both per vector position.
	contrib, pendingSum []int64
	total               int64 // tokens in the last round's reduced vector
	own                 []Load
	done, abandoned     uint64
	lastMicros          uint32
	lastBytes           uint32
	bytesTotal          uint64
	digest              []byte
}

func (s *loopState) init(r *Ring) {
	s.r, s.peers = r, map[string]*peer{}
	s.keys = slices.Clone(r.cfg.Engines)
	s.local = localKeys(s.keys)
	s.shared = s.local // alone, this replica shares its own set
	n := loadValues * len(s.shared)
	s.contrib, s.pendingSum = make([]int64, n), make([]int64, n)
	s.own = make([]Load, len(s.keys))
	s.members, s.rank = []string{r.cfg.ID}, 0
	s.epoch = s.epochOf(s.members, s.shared)
	s.epochNum = 1
	s.remap()
}

// receive dispatches one peer message. Heartbeats and digests count from
// any authenticated replica; chunks and reservations only from members of
// the current epoch (anything else is counted and ignored).
func (s *loopState) receive(from string, m *message) {
	p := s.peer(from)
	p.heard = time.Now()
	switch m.Kind {
	case kindHeartbeat:
		p.hb, p.hbSeen = m.Heartbeat, true
		s.reform() // cheap; a no-op unless the member set changed
	case kindDigest:
		p.digest = m.Digest
		s.compare(p)
	case kindChunk:
		if m.Epoch != s.epoch || !s.member(from) {
			s.r.metrics.ignored.Add(1)
			return
		}
		s.chunk(from, &m.Chunk)
	case kindReserve:
		if m.Epoch != s.epoch || !s.member(from) || from == s.r.cfg.ID {
			s.r.metrics.ignored.Add(1)
			return
		}
		s.addPending(p, m.Reserve)
	}
}

func (s *loopState) heartbeat() {
	s.reform()
	for _, p := range s.peers {
		if p.link != nil {
			s.sendHeartbeat(p)
		}
	}
	s.publishStats()
}

func (s *loopState) sendHeartbeat(p *peer) {
	h := heartbeat{Incarnation: s.r.incarnation, Engines: engineSetHash(s.local), EngineKeys: s.local, EpochNum: s.epochNum,
		RoundsDone: s.done, RoundsAbandoned: s.abandoned, RoundMicros: s.lastMicros, RoundBytes: s.lastBytes,
		ViewTokens: uint64(max(s.viewTokens(), 0)), Hears: s.heard(time.Now())}
	s.send(p.link, appendHeartbeat(nil, s.epoch, &h))
}

// viewTokens is the fleet's queued and decoding tokens as this replica
// sees them: the last reduced vector plus reservations since.
func (s *loopState) viewTokens() int64 {
	t := s.total
	for i := 0; i < len(s.pendingSum); i += loadValues {
		t += s.pendingSum[i] + s.pendingSum[i+1]
	}
	return t
}

func (s *loopState) sendDigest() {
	if s.r.cfg.Digest == nil {
		return
	}
	s.digest = s.r.cfg.Digest()
	body := appendDigest(nil, s.epoch, s.digest)
	for _, p := range s.peers {
		if p.link != nil {
			s.send(p.link, body)
		}
		s.compare(p)
	}
}

func (s *loopState) compare(p *peer) {
	if s.r.cfg.Similarity != nil && s.digest != nil && p.digest != nil {
		p.similarity = s.r.cfg.Similarity(s.digest, p.digest)
	}
}

// send enqueues body on l; a full queue means the peer is not keeping up,
// so its link is dropped (the dialer reconnects, the ring re-forms).
func (s *loopState) send(l *link, body []byte) bool {
	if l == nil {
		return false
	}
	if !l.enqueue(body) {
		s.r.metrics.dropped.Add(1)
		l.close()
		return false
	}
	s.r.metrics.bytesOut.Add(uint64(len(body) + 12))
	return true
}

// publishView makes the peers' load visible to routing, by the caller's
// positions.
func (s *loopState) publishView() {
	v := make([]Load, len(s.keys))
	for k, ci := range s.order {
		i := k * loadValues
		v[ci] = Load{PrefillTokens: s.contrib[i] + s.pendingSum[i], DecodeTokens: s.contrib[i+1] + s.pendingSum[i+1],
			Requests: s.contrib[i+2] + s.pendingSum[i+2]}
	}
	s.r.view.Store(&v)
}
