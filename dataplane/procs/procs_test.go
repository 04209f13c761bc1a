package procs

import "testing"

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		cpus, machine, loops   int
		fixed, extra, adaptive bool
		want                   Plan
	}{
		{2, 2, 0, false, false, false, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 2}},
		{2, 2, 0, false, true, false, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 5, Extra: true}},
		{64, 64, 8, false, true, false, Plan{CPUs: 64, EventLoops: 8, Pollers: 4, GOMAXPROCS: 76, Extra: true}},
		{4, 4, 0, true, true, false, Plan{CPUs: 4, EventLoops: 4, Pollers: 1, GOMAXPROCS: 4, Fixed: true}},
		{0, 1, 0, false, true, false, Plan{CPUs: 1, EventLoops: 1, Pollers: 1, GOMAXPROCS: 3, Extra: true}},
		// adaptive: starts at the CPUs; not with a fixed GOMAXPROCS, --extra-procs, or a quota
		{2, 2, 0, false, false, true, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 2, Adaptive: true}},
		{4, 4, 0, true, false, true, Plan{CPUs: 4, EventLoops: 4, Pollers: 1, GOMAXPROCS: 4, Fixed: true}},
		{2, 2, 0, false, true, true, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 5, Extra: true}},
		{2, 8, 0, false, false, true, Plan{CPUs: 2, EventLoops: 2, Pollers: 1, GOMAXPROCS: 2}},
	} {
		if got := plan(c.cpus, c.machine, c.loops, c.fixed, c.extra, c.adaptive); got != c.want {
			t.Errorf("plan(%d, %d, %d, %v, %v, %v) = %+v, want %+v", c.cpus, c.machine, c.loops, c.fixed, c.extra, c.adaptive, got, c.want)
		}
	}
}
