// Package procs sizes the Go runtime for kvgate's pollers.
//
// gnet's event loops (HTTP) and netpoll's pollers (engine connections)
// wait for events in a blocking epoll_wait, and a goroutine in a system
// call keeps its P until the runtime's sysmon takes it back, on a tick of
// 20 us or more. With GOMAXPROCS at the CPU count the loops and pollers
// hold most of the Ps between events, so a handler goroutine made
// runnable waits for sysmon to free one: the CPUs sit idle while requests
// queue, and sysmon's retakes cost a futex wake and a nanosleep each. One
// P more for each loop and poller leaves a P a CPU for the goroutines
// that have work (perf/RESULTS.md, "Session 11").
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
	// GOMAXPROCS is CPUs plus one a loop and a poller, or the operator's.
	GOMAXPROCS int
	// Fixed: the operator set GOMAXPROCS, which the plan keeps.
	Fixed bool
}

// New plans for eventLoops HTTP event loops (0: one a CPU); fixed says
// the operator set GOMAXPROCS (its environment variable), which is then
// kept and taken as the CPU count. Plans made after an Apply are the same.
func New(eventLoops int, fixed bool) Plan {
	return plan(startCPUs, eventLoops, fixed)
}

// startCPUs is GOMAXPROCS as the process started, before any Apply.
var startCPUs = runtime.GOMAXPROCS(0)

func plan(cpus, eventLoops int, fixed bool) Plan {
	cpus = max(cpus, 1)
	p := Plan{CPUs: cpus, EventLoops: eventLoops, Pollers: cpus/20 + 1, Fixed: fixed}
	if p.EventLoops <= 0 {
		p.EventLoops = cpus
	}
	p.GOMAXPROCS = cpus
	if !fixed {
		p.GOMAXPROCS += p.EventLoops + p.Pollers
	}
	return p
}

// Apply sets the runtime's GOMAXPROCS to the plan's. The runtime then no
// longer follows a change of the cgroup's quota (Go 1.25's default does):
// a router's quota is fixed when it starts.
func (p Plan) Apply() {
	if !p.Fixed {
		runtime.GOMAXPROCS(p.GOMAXPROCS)
	}
}
