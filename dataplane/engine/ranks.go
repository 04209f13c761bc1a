package engine

import (
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// rankLoads keeps the last LOAD of each data-parallel rank of an engine,
// apart: a rank's report never overwrites another's. The read loop is its
// only writer; routing reads it without a lock. reports is copied on
// growth (a rank reporting for the first time) and its elements are
// atomics, so a reader sees either a rank's previous report or its new one.
type rankLoads struct {
	reports atomic.Pointer[[]atomic.Pointer[loadReport]]
	latest  atomic.Pointer[loadReport] // the last report of any rank
}

// maxLoadRanks bounds the ranks whose reports are kept: a report of a rank
// beyond it (beyond what any handshake can announce, u16) is dropped.
const maxLoadRanks = 1 << 16

// Load returns the last report of any rank, or nil.
func (l *rankLoads) Load() *loadReport { return l.latest.Load() }

// Store files r under its rank, numbered within the rank: its seq is one
// more than the rank's previous report's (1 for the first), whatever the
// caller numbered it, so a router's PendingPrefill for the rank counts its
// own reports only.
func (l *rankLoads) Store(r *loadReport) {
	rank := int(r.m.DPRank)
	if rank >= maxLoadRanks {
		return
	}
	rs := l.reports.Load()
	if rs == nil || rank >= len(*rs) {
		grown := make([]atomic.Pointer[loadReport], rank+1)
		if rs != nil {
			for i := range *rs {
				grown[i].Store((*rs)[i].Load())
			}
		}
		l.reports.Store(&grown)
		rs = &grown
	}
	r.seq = 1
	if old := (*rs)[rank].Load(); old != nil {
		r.seq = old.seq + 1
	}
	(*rs)[rank].Store(r)
	l.latest.Store(r)
}

// rank returns rank's last report, or nil.
func (l *rankLoads) rank(rank uint16) *loadReport {
	rs := l.reports.Load()
	if rs == nil || int(rank) >= len(*rs) {
		return nil
	}
	return (*rs)[rank].Load()
}

// Ranks returns the data-parallel ranks of the engine's handshake (at least
// 1; 1 before the first handshake). Routing's candidates are (engine, rank)
// for rank in [0, Ranks).
func (e *Engine) Ranks() int { return max(len(e.profile().slots), 1) }

// RankSlot returns the index slot of a data-parallel rank (and whether the
// engine has that rank).
func (e *Engine) RankSlot(rank uint16) (kvstore.Slot, bool) { return e.rankSlot(rank) }

// RankLoadReport returns the last LOAD rank reported (nil before its
// first), its number among that rank's reports (1 for the first) and when
// it arrived. Each rank's reports are kept apart.
func (e *Engine) RankLoadReport(rank uint16) (l *wire.Load, seq uint64, at time.Time) {
	if r := e.load.rank(rank); r != nil {
		return &r.m, r.seq, r.at
	}
	return nil, 0, time.Time{}
}
