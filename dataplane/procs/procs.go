// Package procs sizes kvgate's event loops, pollers and the runtime's Ps
// for the CPUs the process may use.
//
// gnet's event loops (HTTP) and netpoll's pollers (engine connections)
// wait for events in a blocking epoll_wait, and a goroutine in a system
// call keeps its P until the runtime's sysmon takes it back, on a tick of
// 20 us or more. With GOMAXPROCS at the CPU count the loops and pollers
// hold Ps between events, so a handler goroutine made runnable can wait
// for sysmon to free one. A P more for each loop and poller (Extra) lets
// short requests through faster, but the engine read loops then run as
// soon as a frame arrives: streams from engines faster than the router
// get fewer tokens an SSE event and cost more CPU a token (perf/RESULTS.md,
// "Session 11"). So by default a Governor (governor.go) adds those Ps
// only while the machine has idle CPUs that goroutines wait for, and
// --extra-procs keeps them all the time.
package procs

import (
	"runtime"
)

// Plan is how many event loops, pollers and Ps the daemon runs.
type Plan struct {
	// CPUs the process may use: the runtime's default GOMAXPROCS (the CPU
	// count, or the cgroup's CPU quota), or the operator's GOMAXPROCS.
	CPUs int
	// EventLoops are gnet's HTTP event loops: the operator's number, else
	// one a CPU (gnet's own default counts the machine's CPUs, not the
	// cgroup's quota).
	EventLoops int
	// Pollers are netpoll's: its own default for CPUs (one per 20, plus one).
	Pollers int
	// GOMAXPROCS is CPUs, plus one a loop and a poller with Extra; the
	// operator's when Fixed.
	GOMAXPROCS int
	// Fixed: the operator set GOMAXPROCS, which the plan keeps.
	Fixed bool
	// Extra: a P for each loop and poller besides the CPUs' (--extra-procs).
	Extra bool
	// Adaptive: the plan starts at CPUs, and its Governor adds Extra's Ps
	// while they pay. Never with Fixed or Extra, nor where a cgroup quota
	// leaves the process fewer CPUs than the machine has.
	Adaptive bool
}

// New plans for eventLoops HTTP event loops (0: one a CPU); fixed says
// the operator set GOMAXPROCS (its environment variable), which is then
// kept and taken as the CPU count; extra asks for a P a loop and poller
// besides; adaptive asks for them only while they pay (Governor). Plans
// made after an Apply are the same.
func New(eventLoops int, fixed, extra, adaptive bool) Plan {
	return plan(startCPUs, runtime.NumCPU(), eventLoops, fixed, extra, adaptive)
}

// startCPUs is GOMAXPROCS as the process started, before any Apply.
var startCPUs = runtime.GOMAXPROCS(0)

// plan is New for a process that may use cpus of the machine's machineCPUs.
func plan(cpus, machineCPUs, eventLoops int, fixed, extra, adaptive bool) Plan {
	cpus = max(cpus, 1)
	p := Plan{CPUs: cpus, EventLoops: eventLoops, Pollers: cpus/20 + 1, Fixed: fixed, Extra: extra && !fixed}
	p.Adaptive = adaptive && !fixed && !p.Extra && cpus >= machineCPUs
	if p.EventLoops <= 0 {
		p.EventLoops = cpus
	}
	p.GOMAXPROCS = cpus
	if p.Extra {
		p.GOMAXPROCS += p.EventLoops + p.Pollers
	}
	return p
}

// Apply sets the runtime's GOMAXPROCS to an Extra plan's. The runtime then
// no longer follows a change of the cgroup's quota (Go 1.25's default
// does). Other plans leave the runtime as it is.
func (p Plan) Apply() {
	if p.Extra {
		runtime.GOMAXPROCS(p.GOMAXPROCS)
	}
}
