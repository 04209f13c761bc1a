package engine

import (
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// TestRankLoadsKeptApart: each data-parallel rank's LOAD is kept under its
// rank and numbered among that rank's reports; a report of one rank never
// overwrites another's, and LoadReport is rank 0's.
func TestRankLoadsKeptApart(t *testing.T) {
	hs := ttHandshake("e")
	hs.DPRanks = 4
	eng := ttStartEngine(t, hs, nil)
	p, _ := ttPool(t, nil, eng.addr)
	e := p.Engines()[0]
	c := eng.accept(t)
	ttReady(t, e)
	if e.Ranks() != 4 {
		t.Fatalf("Ranks %d, want 4", e.Ranks())
	}
	for r := range uint16(4) {
		if _, ok := e.RankSlot(r); !ok {
			t.Fatalf("rank %d has no slot", r)
		}
	}
	if _, ok := e.RankSlot(4); ok {
		t.Fatal("rank 4 has a slot")
	}
	send := func(rank uint16, queued uint64) {
		c.send(t, 0, &wire.Load{DPRank: rank, QueuedPrefillTokens: queued})
	}
	send(2, 200)
	send(0, 10)
	send(2, 201)
	send(3, 300)
	ttWaitFor(t, "rank 3's report", func() bool { l, _, _ := e.RankLoadReport(3); return l != nil })
	want := []struct {
		queued uint64
		seq    uint64
	}{{10, 1}, {0, 0}, {201, 2}, {300, 1}}
	for r, w := range want {
		l, seq, _ := e.RankLoadReport(uint16(r))
		got := uint64(0)
		if l != nil {
			got = l.QueuedPrefillTokens
		}
		if (l == nil) != (w.seq == 0) || got != w.queued || seq != w.seq {
			t.Errorf("rank %d: report %v (queued %d) number %d, want queued %d number %d", r, l != nil, got, seq, w.queued, w.seq)
		}
	}
	if l, seq, _ := e.LoadReport(); l == nil || l.QueuedPrefillTokens != 10 || seq != 1 {
		t.Errorf("LoadReport is not rank 0's: %+v #%d", l, seq)
	}
}

// TestRankLoadsGrow: reports of ranks seen for the first time grow the
// table without losing the others' (the copy keeps every rank's report).
func TestRankLoadsGrow(t *testing.T) {
	var l rankLoads
	for _, r := range []uint16{5, 1, 9, 5} {
		l.Store(&loadReport{m: wire.Load{DPRank: r, Running: uint32(r)}})
	}
	for _, r := range []uint16{1, 5, 9} {
		got := l.rank(r)
		if got == nil || got.m.Running != uint32(r) {
			t.Fatalf("rank %d lost its report: %+v", r, got)
		}
	}
	if l.rank(5).seq != 2 || l.rank(9).seq != 1 || l.rank(0) != nil || l.rank(100) != nil {
		t.Fatalf("numbers: 5 #%d, 9 #%d", l.rank(5).seq, l.rank(9).seq)
	}
	if l.Load().m.DPRank != 5 {
		t.Fatalf("latest is rank %d, want 5", l.Load().m.DPRank)
	}
}
