package procs

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"
)

// The governor gives the runtime the spare Ps of an Extra plan only while
// they pay. Under many short requests the loops and pollers hold Ps in
// epoll_wait while handler goroutines wait to run and the machine's CPUs
// sit idle: spare Ps turn that idle time into requests. Under a flood of
// streamed tokens the machine is busy, and spare Ps only make the engine
// read loops run as soon as a frame arrives, so every SSE event carries
// fewer tokens and costs the same write (perf/RESULTS.md, Session 23). So
// every Interval the governor looks at the machine's idle CPU, how long
// runnable goroutines waited for a P, and the process's own CPU, and:
//   - adds the spare Ps after onAfter samples in a row with the machine at
//     least idleOn idle, goroutines waiting waitOn or more on average
//     before they ran, and the process at least busyOn of a CPU busy;
//   - takes them back after offAfter samples in a row with the machine
//     under idleOff idle (it is saturated: batches matter more than
//     hand-offs), or quietAfter samples with the process under quietOn of
//     a CPU (no load: the next burst starts from the default).
//
// The machine's idle time is /proc/stat's, so the governor runs only where
// the process may use every CPU of the machine (no cgroup quota below it):
// with a quota, the machine's idle CPUs are not the process's to use.
const (
	idleOn     = 0.10
	waitOn     = 50 * time.Microsecond
	busyOn     = 0.25
	onAfter    = 3
	idleOff    = 0.03
	offAfter   = 2
	quietOn    = 0.05
	quietAfter = 10
)

// Sample is what the governor sees over one interval.
type Sample struct {
	// Idle is the share of the machine's CPU time spent idle (steal time
	// counts as not idle: the hypervisor took it).
	Idle float64
	// Wait is the mean time a runnable goroutine waited before it ran;
	// Waits is how many waits the runtime sampled.
	Wait  time.Duration
	Waits uint64
	// Busy is the process's CPU time over the interval, in CPUs.
	Busy float64
}

// Governor moves GOMAXPROCS between the runtime's default and a plan's
// Extra count by what it sees (see above). Its zero value is not usable:
// Plan.Governor makes one.
type Governor struct {
	extra    int
	interval time.Duration
	log      *slog.Logger
	sampler  func() (Sample, error)
	set      func(n int) // n == 0: the runtime's default
	spare    atomic.Bool
	changes  atomic.Uint64
	onRun    int // samples in a row for the spare Ps
	offRun   int // samples in a row saying saturated
	quietRun int // samples in a row saying quiet
}

// Interval is how often a governor samples.
const Interval = 100 * time.Millisecond

// Governor returns the governor of an Adaptive plan, nil for others.
func (p Plan) Governor(log *slog.Logger) *Governor {
	if !p.Adaptive {
		return nil
	}
	return &Governor{extra: p.CPUs + p.EventLoops + p.Pollers, interval: Interval, log: log, set: setProcs}
}

// setProcs sets GOMAXPROCS to n, or back to the runtime's default (which
// follows the cgroup's quota again) for 0.
func setProcs(n int) {
	if n == 0 {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(n)
}

// Spare reports whether the spare Ps are in use now.
func (g *Governor) Spare() bool { return g.spare.Load() }

// Changes counts the governor's changes of GOMAXPROCS.
func (g *Governor) Changes() uint64 { return g.changes.Load() }

// Run samples every interval until ctx ends, then leaves GOMAXPROCS at the
// runtime's default. Where the machine's CPU times cannot be read it logs
// why and returns at once, GOMAXPROCS untouched.
func (g *Governor) Run(ctx context.Context) {
	sampler := g.sampler
	if sampler == nil {
		s, err := newSampler()
		if err != nil {
			g.log.Warn("procs governor off: cannot sample CPU times", "err", err)
			return
		}
		sampler = s.sample
	}
	defer func() {
		if g.spare.Load() {
			g.switchTo(false)
		}
	}()
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s, err := sampler()
		if err != nil {
			g.log.Warn("procs governor: sampling failed", "err", err)
			continue
		}
		if want := g.observe(s); want != g.spare.Load() {
			g.switchTo(want)
			g.log.Debug("procs governor", "spare_procs", want, "gomaxprocs", runtime.GOMAXPROCS(0),
				"idle", s.Idle, "wait_us", s.Wait.Microseconds(), "busy_cpus", s.Busy)
		}
	}
}

func (g *Governor) switchTo(spare bool) {
	n := 0
	if spare {
		n = g.extra
	}
	g.set(n)
	g.spare.Store(spare)
	g.changes.Add(1)
	g.onRun, g.offRun, g.quietRun = 0, 0, 0
}

// observe takes one interval's sample and reports whether the spare Ps
// should be in use after it.
func (g *Governor) observe(s Sample) bool {
	if !g.spare.Load() {
		if s.Idle >= idleOn && s.Waits > 0 && s.Wait >= waitOn && s.Busy >= busyOn {
			g.onRun++
		} else {
			g.onRun = 0
		}
		return g.onRun >= onAfter
	}
	g.offRun = runOf(g.offRun, s.Idle < idleOff)
	g.quietRun = runOf(g.quietRun, s.Busy < quietOn)
	return g.offRun < offAfter && g.quietRun < quietAfter
}

// runOf extends a run of samples in a row by one when ok, else ends it.
func runOf(run int, ok bool) int {
	if ok {
		return run + 1
	}
	return 0
}
