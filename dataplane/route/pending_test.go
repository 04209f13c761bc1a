package route

import "testing"

func TestPendingPrefill(t *testing.T) {
	p := PendingPrefill{Delay: 5}
	check := func(step string, got, want float64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: queued %v, want %v", step, got, want)
		}
	}
	// No report yet: the reservations are all there is.
	a := p.Reserve(0, 100_000)
	b := p.Reserve(1, 2_000)
	check("before any report", p.Queued(0, 0), 102_000)
	p.Started(b)
	check("one started", p.Queued(0, 0), 100_000)

	// Report 1 arrives at 100 and says 40k are left of the long prompt: it
	// replaces the reservation, which counted the whole prompt until its
	// first token.
	c := p.Reserve(97, 5_000) // within Delay of the report: maybe not in it
	p.Report(1, 100, 0)
	check("report 1", p.Queued(40_000, 0), 45_000)
	p.Report(1, 100, 0) // the same report again changes nothing
	check("report 1 again", p.Queued(40_000, 0), 45_000)
	d := p.Reserve(120, 1_000)
	check("reserved after report 1", p.Queued(40_000, 0), 46_000)
	p.Started(a) // counted by report 1 already: no change
	check("old reservation started", p.Queued(40_000, 0), 46_000)

	// Peers reserve 3k after report 1; their sum falling below what it was
	// (their older requests started) does not lower the estimate.
	check("peers grew", p.Queued(40_000, 3_000), 49_000)
	check("peers shrank", p.Queued(40_000, -7_000), 46_000)

	// Report 2 at 200 counts everything before 195.
	p.Report(2, 200, 3_000)
	check("report 2", p.Queued(6_000, 3_000), 6_000)
	p.Started(c)
	p.Started(d)
	check("older reservations started", p.Queued(6_000, 3_000), 6_000)
	e := p.Reserve(250, 700)
	check("reserved after report 2", p.Queued(6_000, 3_000), 6_700)
	p.Started(e)
	check("and started", p.Queued(6_000, 3_000), 6_000)
	if len(p.open) != 0 {
		t.Fatalf("%d reservations left open", len(p.open))
	}
}
