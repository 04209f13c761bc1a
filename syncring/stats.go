package syncring

import (
	"math"
	"slices"
	"time"
)

// Stats is a replica's view of the ring, for /metrics and /debug/state.
// It is refreshed every heartbeat and on every membership change.
type Stats struct {
	ID      string   `json:"id"`
	Epoch   uint64   `json:"epoch"` // epochs this replica has been through
	Members []string `json:"members"`
	// Engines this replica has (distinct keys) and the ones the ring's
	// vectors cover: the keys every member has.
	Engines       int `json:"engines"`
	SharedEngines int `json:"shared_engines"`
	// Rounds this replica completed and gave up; the last round's latency
	// and the bytes it sent in it.
	RoundsDone      uint64 `json:"rounds_done"`
	RoundsAbandoned uint64 `json:"rounds_abandoned"`
	RoundMicros     uint32 `json:"round_us"`
	RoundBytes      uint32 `json:"round_bytes"`
	RoundBytesTotal uint64 `json:"round_bytes_total"` // over all completed rounds
	// Since start: ring bytes in and out, peers refused at the handshake,
	// messages ignored (wrong epoch, not a member, out of turn) and links
	// dropped for not keeping up.
	BytesIn  uint64      `json:"bytes_in"`
	BytesOut uint64      `json:"bytes_out"`
	Refused  uint64      `json:"refused"`
	Ignored  uint64      `json:"ignored"`
	Dropped  uint64      `json:"dropped"`
	Peers    []PeerStats `json:"peers"`
}

// PeerStats is one peer as this replica sees it; the round figures are the
// peer's own, from its last heartbeat.
type PeerStats struct {
	ID        string  `json:"id"`
	Member    bool    `json:"member"`
	Connected bool    `json:"connected"`
	HeardMs   float64 `json:"heard_ms_ago"`
	// Similarity of the peer's index digest to ours (0..1; -1 unknown).
	Similarity float64 `json:"index_similarity"`
	// Divergence of the fleet's token load as the peer sees it from ours:
	// |theirs - ours| / max(theirs, ours), 0 when they agree.
	Divergence      float64 `json:"load_divergence"`
	Epoch           uint64  `json:"epoch"`
	RoundsDone      uint64  `json:"rounds_done"`
	RoundsAbandoned uint64  `json:"rounds_abandoned"`
	RoundMicros     uint32  `json:"round_us"`
	RoundBytes      uint32  `json:"round_bytes"`
	Pending         int     `json:"pending_reservations"`
}

// Stats returns the latest published stats.
func (r *Ring) Stats() Stats { return *r.stats.Load() }

func (r *Ring) publishStats() { r.loop.publishStats() }

func (s *loopState) publishStats() {
	r := s.r
	st := &Stats{ID: r.cfg.ID, Epoch: s.epochNum, Members: slices.Clone(s.members), Engines: len(s.local), SharedEngines: len(s.shared),
		RoundsDone: s.done, RoundsAbandoned: s.abandoned, RoundMicros: s.lastMicros, RoundBytes: s.lastBytes, RoundBytesTotal: s.bytesTotal,
		BytesIn: r.metrics.bytesIn.Load(), BytesOut: r.metrics.bytesOut.Load(), Refused: r.metrics.refused.Load(),
		Ignored: r.metrics.ignored.Load(), Dropped: r.metrics.dropped.Load()}
	now := time.Now()
	mine := float64(s.viewTokens())
	for id, p := range s.peers {
		ps := PeerStats{ID: id, Member: s.member(id), Connected: p.link != nil, Similarity: p.similarity,
			Epoch: p.hb.EpochNum, RoundsDone: p.hb.RoundsDone, RoundsAbandoned: p.hb.RoundsAbandoned,
			RoundMicros: p.hb.RoundMicros, RoundBytes: p.hb.RoundBytes}
		for _, b := range p.pending {
			ps.Pending += len(b.Items)
		}
		if p.hbSeen {
			ps.HeardMs = float64(now.Sub(p.heard).Microseconds()) / 1000
			theirs := float64(p.hb.ViewTokens)
			if m := math.Max(theirs, mine); m > 0 {
				ps.Divergence = math.Abs(theirs-mine) / m
			}
		}
		st.Peers = append(st.Peers, ps)
	}
	slices.SortFunc(st.Peers, func(a, b PeerStats) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	r.stats.Store(st)
}

// publishStatsSoon asks the loop to refresh the stats now.
func (r *Ring) publishStatsSoon() {
	select {
	case r.events <- refreshStats{}:
	default:
	}
}

type refreshStats struct{}
