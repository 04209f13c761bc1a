package gateway

import (
	"sync/atomic"
	"time"
)

// alarm is one coarse clock that the requests waiting for their first
// token share, in place of a timer each. A timer a request cost a Reset
// and a Stop on the runtime's timer heap, and a timer channel in every
// wait's select, which the runtime locks and adds to that heap each time
// the wait parks. A wait instead selects on the alarm's channel, which is
// closed once a tick, and checks its own deadline when it wakes: a
// deadline is noticed up to a tick late, and a wait wakes about
// timeout/tick times before its deadline (none when its first token comes
// sooner, as nearly all do). Ticks run only while some wait asked for one.
type alarm struct {
	c atomic.Pointer[chan struct{}] // closed at the next tick; nil: none is set
}

// alarmTicks is how many ticks a first-token timeout spans: a deadline is
// noticed at most 1/alarmTicks of the timeout late.
const alarmTicks = 16

// minAlarmTick bounds a tick from below, for very short timeouts.
const minAlarmTick = time.Millisecond

// tickOf is the alarm's tick for a timeout.
func tickOf(timeout time.Duration) time.Duration { return max(timeout/alarmTicks, minAlarmTick) }

// next returns a channel closed at the next tick, at most tick from now;
// the first wait that finds none set sets it.
func (a *alarm) next(tick time.Duration) <-chan struct{} {
	if c := a.c.Load(); c != nil {
		return *c
	}
	c := make(chan struct{})
	if !a.c.CompareAndSwap(nil, &c) {
		return a.next(tick)
	}
	time.AfterFunc(tick, func() {
		a.c.Store(nil) // before the close: a wait that wakes early finds a fresh tick, not this closed one
		close(c)
	})
	return c
}
