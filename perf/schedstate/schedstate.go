// Package schedstate reads a Go execution trace (runtime/trace, or the
// admin listener's /debug/pprof/trace) and tells how the traced process's
// goroutines spent its time: running Go code, runnable and waiting for a
// P, in a system call, or in an event poller's wait.
//
// The last is why it exists. gnet's event loops and netpoll's pollers wait
// for events in a blocking epoll_wait, and a goroutine in a system call
// keeps its P until the runtime's sysmon takes it back (perf/RESULTS.md,
// Session 16 and 22). A P held that way runs nothing, so goroutines can be
// runnable while a CPU is idle. A CPU profile cannot show that: it samples
// what runs. The trace shows every goroutine's state at every instant, and
// the stack of each system call tells a poller's wait from a write.
package schedstate

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// Summary is a trace's goroutine states over time. The means are over the
// traced time, weighted by how long each state lasted: Running 1.5 says
// that on average one and a half goroutines ran Go code.
type Summary struct {
	// Duration is the time between the trace's first and last event.
	Duration time.Duration
	// CPUs is the count the shares below are taken against.
	CPUs int
	// Running, Runnable, Syscall and PollWait are mean counts of
	// goroutines: running Go code, ready to run and waiting for a P, in a
	// system call other than a poller's wait, and in a poller's wait
	// (a blocking epoll_wait, which holds its P).
	Running, Runnable, Syscall, PollWait float64
	// ProcsRunning is the mean count of Ps in use, a poller's held P
	// among them; PollHeld the mean count of Ps held by a poller's wait
	// (sysmon had not taken them back yet).
	ProcsRunning, PollHeld float64
	// Starved is the share of the time during which goroutines were
	// runnable while fewer than CPUs goroutines ran or made a system call
	// other than a poller's wait: work waited while a CPU could have
	// taken it.
	Starved float64
	// WaitedOnPoller is the share of the time during which goroutines were
	// runnable while at least one poller's wait held a P.
	WaitedOnPoller float64
}

// String is the summary on one line.
func (s Summary) String() string {
	return fmt.Sprintf("%.2fs traced, %d CPUs: mean goroutines running %.2f, in system calls %.2f, in poller waits %.2f, runnable %.2f; mean Ps in use %.2f, held by poller waits %.2f; time with runnable work while a poller's wait holds a P %.1f%%, while under %d goroutines run or make system calls %.1f%%",
		s.Duration.Seconds(), s.CPUs, s.Running, s.Syscall, s.PollWait, s.Runnable, s.ProcsRunning, s.PollHeld,
		100*s.WaitedOnPoller, s.CPUs, 100*s.Starved)
}

// goState is what Read keeps of a goroutine: its state, and for a system
// call whether it is a poller's wait and the P it still holds (NoProc once
// sysmon took it, or when it entered without one).
type goState struct {
	st   trace.GoState
	poll bool
	p    trace.ProcID
}

// counts are the goroutines and Ps in each state at an instant.
type counts struct {
	running, runnable, syscall, poll, procs, held int
}

// add counts g's state with sign d (+1 entering it, -1 leaving it).
func (c *counts) add(g goState, d int) {
	switch {
	case g.st == trace.GoRunning:
		c.running += d
	case g.st == trace.GoRunnable:
		c.runnable += d
	case g.st == trace.GoSyscall && g.poll:
		c.poll += d
	case g.st == trace.GoSyscall:
		c.syscall += d
	}
}

// Read summarizes the trace in r against cpus CPUs (at least 1).
func Read(r io.Reader, cpus int) (Summary, error) {
	cpus = max(cpus, 1)
	tr, err := trace.NewReader(r)
	if err != nil {
		return Summary{}, fmt.Errorf("reading trace: %w", err)
	}
	gos := map[trace.GoID]goState{}
	procs := map[trace.ProcID]trace.ProcState{}
	var c counts
	var first, last trace.Time
	holder := map[trace.ProcID]trace.GoID{} // a P held by a goroutine in a system call
	// release ends the hold of a goroutine in a system call on its P.
	release := func(id trace.GoID, g *goState) {
		if g.p == trace.NoProc {
			return
		}
		if holder[g.p] == id {
			delete(holder, g.p)
		}
		if g.poll {
			c.held--
		}
		g.p = trace.NoProc
	}
	var sum struct{ running, runnable, syscall, poll, procs, held, starved, waited float64 }
	started := false
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Summary{}, fmt.Errorf("reading trace: %w", err)
		}
		t := ev.Time()
		if !started {
			first, started = t, true
		} else if d := float64(t - last); d > 0 {
			sum.running += d * float64(c.running)
			sum.runnable += d * float64(c.runnable)
			sum.syscall += d * float64(c.syscall)
			sum.poll += d * float64(c.poll)
			sum.procs += d * float64(c.procs)
			sum.held += d * float64(c.held)
			if c.runnable > 0 && c.running+c.syscall < cpus {
				sum.starved += d
			}
			if c.runnable > 0 && c.held > 0 {
				sum.waited += d
			}
		}
		last = max(last, t)
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			id := st.Resource.Proc()
			_, to := st.Proc()
			if procs[id] == trace.ProcRunning {
				c.procs--
				if gid, ok := holder[id]; ok && to != trace.ProcRunning { // taken back (ProcSteal) or stopped
					g := gos[gid]
					release(gid, &g)
					gos[gid] = g
				}
			}
			if to == trace.ProcRunning {
				c.procs++
			}
			procs[id] = to
		case trace.ResourceGoroutine:
			id := st.Resource.Goroutine()
			_, to := st.Goroutine()
			if old, ok := gos[id]; ok {
				release(id, &old)
				c.add(old, -1)
			}
			g := goState{st: to, p: trace.NoProc}
			if to == trace.GoSyscall {
				g.poll = pollerWait(st.Stack) || pollerWait(ev.Stack())
				if p := ev.Proc(); p != trace.NoProc {
					g.p, holder[p] = p, id
					if g.poll {
						c.held++
					}
				}
			}
			if to == trace.GoNotExist {
				delete(gos, id)
				continue
			}
			c.add(g, +1)
			gos[id] = g
		}
	}
	if !started {
		return Summary{}, errors.New("reading trace: no events")
	}
	total := float64(last - first)
	if total <= 0 {
		return Summary{}, errors.New("reading trace: its events span no time")
	}
	return Summary{
		Duration: time.Duration(last - first), CPUs: cpus,
		Running: sum.running / total, Runnable: sum.runnable / total, Syscall: sum.syscall / total,
		PollWait: sum.poll / total, ProcsRunning: sum.procs / total, PollHeld: sum.held / total,
		Starved: sum.starved / total, WaitedOnPoller: sum.waited / total,
	}, nil
}

// pollerWait reports whether a system call's stack is an event poller's
// wait: golang.org/x/sys/unix.EpollWait (gnet) or netpoll's EpollWait,
// or an epollWait of a library's own.
func pollerWait(s trace.Stack) bool {
	for f := range s.Frames() {
		name := f.Func[strings.LastIndexByte(f.Func, '.')+1:]
		if strings.EqualFold(name, "EpollWait") {
			return true
		}
	}
	return false
}
