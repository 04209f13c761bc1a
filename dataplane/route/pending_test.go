package route

import "testing"

func TestPendingPrefill(t *testing.T) {
	var p PendingPrefill
	check := func(step string, got, want float64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: queued %v, want %v", step, got, want)
		}
	}
	// No report yet: the reservations are all there is.
	a := p.Reserve(0, 0, 100_000)
	b := p.Reserve(0, 0, 2_000)
	check("before any report", p.Queued(0, 0, 0), 102_000)
	p.Started(b, 2_000)
	check("one started", p.Queued(0, 0, 0), 100_000)

	// Report 1 says 40k are left of the long prompt: it replaces the
	// reservation, which counted the whole prompt until its first token.
	check("report 1", p.Queued(1, 40_000, 0), 40_000)
	c := p.Reserve(1, 0, 5_000)
	check("reserved after report 1", p.Queued(1, 40_000, 0), 45_000)
	p.Started(a, 100_000) // counted by report 1 already: no change
	check("old reservation started", p.Queued(1, 40_000, 0), 45_000)

	// Peers reserve 3k after report 1; their sum falling below what it was
	// (their older requests started) does not lower the estimate.
	check("peers grew", p.Queued(1, 40_000, 3_000), 48_000)
	check("peers shrank", p.Queued(1, 40_000, -7_000), 45_000)

	// Report 2 counts everything before it.
	check("report 2", p.Queued(2, 6_000, 3_000), 6_000)
	p.Started(c, 5_000)
	check("report-1 reservation started", p.Queued(2, 6_000, 3_000), 6_000)
	d := p.Reserve(2, 3_000, 1_000)
	p.Started(d, 1_000)
	check("reserved and started between reports", p.Queued(2, 6_000, 3_000), 6_000)
}
