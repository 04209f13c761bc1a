package procs

import "testing"

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		cpus, loops int
		fixed       bool
		want        Plan
	}{
		{2, 0, false, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 5}},
		{64, 8, false, Plan{CPUs: 64, EventLoops: 8, Pollers: 4, GOMAXPROCS: 76}},
		{4, 0, true, Plan{CPUs: 4, EventLoops: 4, Pollers: 1, GOMAXPROCS: 4, Fixed: true}},
		{0, 0, false, Plan{CPUs: 1, EventLoops: 1, Pollers: 1, GOMAXPROCS: 3}},
	} {
		if got := plan(c.cpus, c.loops, c.fixed); got != c.want {
			t.Errorf("plan(%d, %d, %v) = %+v, want %+v", c.cpus, c.loops, c.fixed, got, c.want)
		}
	}
}
