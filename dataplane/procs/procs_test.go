package procs

import "testing"

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		cpus, loops  int
		fixed, extra bool
		want         Plan
	}{
		{2, 0, false, false, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 2}},
		{2, 0, false, true, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 5, Extra: true}},
		{64, 8, false, true, Plan{CPUs: 64, EventLoops: 8, Pollers: 4, GOMAXPROCS: 76, Extra: true}},
		{4, 0, true, true, Plan{CPUs: 4, EventLoops: 4, Pollers: 1, GOMAXPROCS: 4, Fixed: true}},
		{0, 0, false, true, Plan{CPUs: 1, EventLoops: 1, Pollers: 1, GOMAXPROCS: 3, Extra: true}},
	} {
		if got := plan(c.cpus, c.loops, c.fixed, c.extra); got != c.want {
			t.Errorf("plan(%d, %d, %v, %v) = %+v, want %+v", c.cpus, c.loops, c.fixed, c.extra, got, c.want)
		}
	}
}
