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
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
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
	// HeldBy splits PollHeld by poller: the function that called the wait
	// (gnet's Poller.Polling, netpoll's defaultPoll.Wait).
	HeldBy map[string]float64
	// WaitingAt is the mean count of runnable goroutines while a poller's
	// wait held a P, by the function where each last stopped (its first
	// frame outside the runtime): what the held Ps kept waiting.
	WaitingAt map[string]float64
}

// String is the summary on one line.
func (s Summary) String() string {
	return fmt.Sprintf("%.2fs traced, %d CPUs: mean goroutines running %.2f, in system calls %.2f, in poller waits %.2f, runnable %.2f; mean Ps in use %.2f, held by poller waits %.2f; time with runnable work while a poller's wait holds a P %.1f%%, while under %d goroutines run or make system calls %.1f%%",
		s.Duration.Seconds(), s.CPUs, s.Running, s.Syscall, s.PollWait, s.Runnable, s.ProcsRunning, s.PollHeld,
		100*s.WaitedOnPoller, s.CPUs, 100*s.Starved)
}

// Detail writes the breakdowns, largest first, n of each (0: all).
func (s Summary) Detail(w io.Writer, n int) {
	top := func(title string, m map[string]float64) {
		fmt.Fprintln(w, title)
		keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
		if n > 0 && len(keys) > n {
			keys = keys[:n]
		}
		for _, k := range keys {
			fmt.Fprintf(w, "  %6.3f  %s\n", m[k], k)
		}
	}
	top("mean Ps held by poller waits, by poller:", s.HeldBy)
	top("mean runnable goroutines while a poller's wait holds a P, by where they stopped:", s.WaitingAt)
}

// goState is what Read keeps of a goroutine: its state; where it stopped
// (its stack's first frame outside the runtime, or its poller's caller);
// for a system call, whether it is a poller's wait, and the P it still
// holds (NoProc once sysmon took it, or when it entered without one).
type goState struct {
	st    trace.GoState
	where string
	poll  bool
	p     trace.ProcID
}

// reader is Read's state: the goroutines and Ps, what is in each state at
// the instant reached, and the sums over time so far.
type reader struct {
	cpus   int
	gos    map[trace.GoID]goState
	procs  map[trace.ProcID]trace.ProcState
	holder map[trace.ProcID]trace.GoID // a P held by a goroutine in a system call
	// At the instant reached: goroutines in each state, Ps in use, Ps held
	// by poller waits, and the same two split by where.
	running, runnable, syscall, poll, procsUsed, held int
	heldBy, runnableAt                                map[string]int
	// Sums over time of the above, and of the starved and waited instants.
	sum                struct{ running, runnable, syscall, poll, procs, held, starved, waited float64 }
	sumHeldBy, sumAtFn map[string]float64
}

// Read summarizes the trace in r against cpus CPUs (at least 1).
func Read(r io.Reader, cpus int) (Summary, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return Summary{}, fmt.Errorf("reading trace: %w", err)
	}
	rd := &reader{cpus: max(cpus, 1), gos: map[trace.GoID]goState{}, procs: map[trace.ProcID]trace.ProcState{},
		holder: map[trace.ProcID]trace.GoID{}, heldBy: map[string]int{}, runnableAt: map[string]int{},
		sumHeldBy: map[string]float64{}, sumAtFn: map[string]float64{}}
	var first, last trace.Time
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
		} else if t > last {
			rd.elapse(float64(t - last))
		}
		last = max(last, t)
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		switch st := ev.StateTransition(); st.Resource.Kind {
		case trace.ResourceProc:
			rd.proc(st)
		case trace.ResourceGoroutine:
			rd.goroutine(&ev, st)
		}
	}
	if !started {
		return Summary{}, errors.New("reading trace: no events")
	}
	return rd.summary(time.Duration(last - first))
}

// elapse adds d nanoseconds of the present counts to the sums.
func (rd *reader) elapse(d float64) {
	s := &rd.sum
	s.running += d * float64(rd.running)
	s.runnable += d * float64(rd.runnable)
	s.syscall += d * float64(rd.syscall)
	s.poll += d * float64(rd.poll)
	s.procs += d * float64(rd.procsUsed)
	s.held += d * float64(rd.held)
	if rd.runnable > 0 && rd.running+rd.syscall < rd.cpus {
		s.starved += d
	}
	if rd.runnable > 0 && rd.held > 0 {
		s.waited += d
		for k, n := range rd.runnableAt {
			rd.sumAtFn[k] += d * float64(n)
		}
	}
	for k, n := range rd.heldBy {
		rd.sumHeldBy[k] += d * float64(n)
	}
}

// proc follows a P's transition: one that stops running (taken back by
// sysmon, or stopped) ends the hold of a goroutine in a system call on it.
func (rd *reader) proc(st trace.StateTransition) {
	id := st.Resource.Proc()
	_, to := st.Proc()
	if rd.procs[id] == trace.ProcRunning {
		rd.procsUsed--
		if gid, ok := rd.holder[id]; ok && to != trace.ProcRunning {
			g := rd.gos[gid]
			rd.release(gid, &g)
			rd.gos[gid] = g
		}
	}
	if to == trace.ProcRunning {
		rd.procsUsed++
	}
	rd.procs[id] = to
}

// goroutine follows a goroutine's transition.
func (rd *reader) goroutine(ev *trace.Event, st trace.StateTransition) {
	id := st.Resource.Goroutine()
	_, to := st.Goroutine()
	old, known := rd.gos[id]
	if known {
		rd.release(id, &old)
		rd.count(old, -1)
	}
	if to == trace.GoNotExist {
		delete(rd.gos, id)
		return
	}
	g := goState{st: to, where: old.where, p: trace.NoProc}
	if w, poll := stopped(st.Stack); w != "" { // a goroutine made runnable has no stack: it keeps where it stopped
		g.where, g.poll = w, poll
	}
	if to == trace.GoSyscall {
		if !g.poll { // a syscall's stack may be on the event instead
			if w, poll := stopped(ev.Stack()); poll {
				g.where, g.poll = w, true
			}
		}
		if p := ev.Proc(); p != trace.NoProc {
			g.p, rd.holder[p] = p, id
			if g.poll {
				rd.held++
				rd.heldBy[g.where]++
			}
		}
	} else {
		g.poll = false
	}
	rd.count(g, +1)
	rd.gos[id] = g
}

// count counts g's state with sign d (+1 entering it, -1 leaving it).
func (rd *reader) count(g goState, d int) {
	switch {
	case g.st == trace.GoRunning:
		rd.running += d
	case g.st == trace.GoRunnable:
		rd.runnable += d
		rd.runnableAt[g.where] += d
	case g.st == trace.GoSyscall && g.poll:
		rd.poll += d
	case g.st == trace.GoSyscall:
		rd.syscall += d
	}
}

// release ends the hold of a goroutine in a system call on its P.
func (rd *reader) release(id trace.GoID, g *goState) {
	if g.p == trace.NoProc {
		return
	}
	if rd.holder[g.p] == id {
		delete(rd.holder, g.p)
	}
	if g.poll {
		rd.held--
		rd.heldBy[g.where]--
	}
	g.p = trace.NoProc
}

// summary is the means over a trace of the given span.
func (rd *reader) summary(span time.Duration) (Summary, error) {
	total := float64(span)
	if total <= 0 {
		return Summary{}, errors.New("reading trace: its events span no time")
	}
	s := rd.sum
	out := Summary{Duration: span, CPUs: rd.cpus,
		Running: s.running / total, Runnable: s.runnable / total, Syscall: s.syscall / total,
		PollWait: s.poll / total, ProcsRunning: s.procs / total, PollHeld: s.held / total,
		Starved: s.starved / total, WaitedOnPoller: s.waited / total,
		HeldBy: map[string]float64{}, WaitingAt: map[string]float64{}}
	for k, v := range rd.sumHeldBy {
		out.HeldBy[k] = v / total
	}
	for k, v := range rd.sumAtFn {
		out.WaitingAt[k] = v / total
	}
	return out, nil
}

// stopped is where a stack stopped, its first frame outside the runtime
// and the system call wrappers, and whether it is an event poller's wait:
// golang.org/x/sys/unix.EpollWait (gnet) or netpoll's EpollWait, or an
// epollWait of a library's own; the wait's caller is then where. An empty
// stack gives "".
func stopped(s trace.Stack) (where string, poll bool) {
	var fns []string
	for f := range s.Frames() {
		fns = append(fns, f.Func)
	}
	from := 0
	for i, fn := range fns {
		if strings.EqualFold(fn[strings.LastIndexByte(fn, '.')+1:], "EpollWait") {
			poll, from = true, i+1
			break
		}
	}
	for _, fn := range fns[from:] {
		if !inRuntime(fn) {
			return fn, poll
		}
	}
	return "", poll
}

// inRuntime reports whether fn is the runtime's or a system call wrapper.
func inRuntime(fn string) bool {
	for _, p := range []string{"runtime.", "internal/", "syscall.", "golang.org/x/sys/"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}
