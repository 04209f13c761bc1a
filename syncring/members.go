package syncring

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/zeebo/xxh3"
)

// peer is what the loop knows of another replica.
type peer struct {
	id         string
	link       *link // outbound; nil while not connected
	hb         heartbeat
	heard      time.Time // last message of any kind
	hbSeen     bool
	digest     []byte
	similarity float64 // of its digest to ours; -1 until both are known
	pending    []reserveBatch
}

func (s *loopState) peer(id string) *peer {
	p, ok := s.peers[id]
	if !ok {
		p = &peer{id: id, similarity: -1}
		s.peers[id] = p
	}
	return p
}

// hears: connected to p and heard from it within DeadAfter.
func (s *loopState) hears(p *peer, now time.Time) bool {
	return p.link != nil && p.hbSeen && now.Sub(p.heard) < s.r.cfg.DeadAfter
}

// alive: we hear p and p hears us (engine sets may differ: engines.go).
func (s *loopState) alive(p *peer, now time.Time) bool {
	return s.hears(p, now) && slices.Contains(p.hb.Hears, s.r.cfg.ID)
}

// heard lists the peers this replica hears, for its heartbeat.
func (s *loopState) heard(now time.Time) []string {
	var ids []string
	for id, p := range s.peers {
		if s.hears(p, now) {
			ids = append(ids, id)
		}
	}
	return ids
}

func (s *loopState) linkUp(l *link) {
	p := s.peer(l.id)
	if p.link != nil && p.link != l {
		l.close() // a second address of the same peer: keep the first link
		return
	}
	p.link = l
	s.publishLinks()
	s.sendHeartbeat(p)
	s.reform()
}

func (s *loopState) linkDown(l *link) {
	if p := s.peers[l.id]; p != nil && p.link == l {
		p.link = nil
		s.publishLinks()
		s.reform()
	}
}

func (s *loopState) publishLinks() {
	var ls []*link
	for _, p := range s.peers {
		if p.link != nil {
			ls = append(ls, p.link)
		}
	}
	s.r.links.Store(&ls)
}

// reform recomputes the members; a different set starts a new epoch. The
// epoch is a hash of the members and their incarnations, so replicas that
// see the same ring agree on it without talking, and a restarted replica
// (new incarnation) is a new epoch even with the same id.
func (s *loopState) reform() {
	now := time.Now()
	members := []string{s.r.cfg.ID}
	for id, p := range s.peers {
		if s.alive(p, now) {
			members = append(members, id)
		} else if p.link != nil && p.hbSeen && now.Sub(p.heard) >= s.r.cfg.DeadAfter {
			p.link.close() // silent: drop the connection, the dialer retries
		}
	}
	slices.Sort(members)
	shared := s.sharedKeys(members)
	epoch := s.epochOf(members, shared)
	if epoch == s.epoch {
		return
	}
	old := len(s.members)
	s.abandon()
	s.epoch, s.members = epoch, members
	s.epochNum++
	s.rank = slices.Index(members, s.r.cfg.ID)
	s.lastRound = 0
	for id, p := range s.peers {
		if !slices.Contains(members, id) {
			s.dropPending(p, ^uint64(0))
		}
	}
	if !slices.Equal(shared, s.shared) {
		s.reshape(shared)
	}
	if len(members) == 1 {
		clear(s.contrib) // alone: no peer load
		s.total = 0
	}
	s.remap()
	s.publishView()
	s.r.log.Info("ring: re-formed", "id", s.r.cfg.ID, "epoch", s.epochNum, "members", members, "was", old,
		"shared_engines", len(shared), "engines", len(s.local))
	s.publishStats()
}

// reshape lays the peers' load out over a new shared set: each key keeps
// its last reduced load; reservations pending by the old positions are
// dropped (the next round counts them).
func (s *loopState) reshape(shared []string) {
	contrib := make([]int64, loadValues*len(shared))
	for k, key := range shared {
		if j, ok := slices.BinarySearch(s.shared, key); ok {
			copy(contrib[k*loadValues:(k+1)*loadValues], s.contrib[j*loadValues:(j+1)*loadValues])
		}
	}
	s.shared, s.contrib = shared, contrib
	s.pendingSum = make([]int64, len(contrib))
	for _, p := range s.peers {
		p.pending = nil
	}
}

// epochOf identifies a ring: its members, their incarnations and the
// engine keys its vectors cover.
func (s *loopState) epochOf(members, shared []string) uint64 {
	b := binary.LittleEndian.AppendUint64(nil, engineSetHash(shared))
	for _, id := range members {
		inc := s.r.incarnation
		if id != s.r.cfg.ID {
			inc = s.peers[id].hb.Incarnation
		}
		b = append(b, id...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint64(b, inc)
	}
	return xxh3.Hash(b)
}

// member reports whether id is in the current ring.
func (s *loopState) member(id string) bool {
	_, ok := slices.BinarySearch(s.members, id)
	return ok
}
