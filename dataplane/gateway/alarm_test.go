package gateway

import (
	"testing"
	"time"
)

// TestAlarmTicks: waits before a tick share its channel, the tick closes
// it, and a wait after it gets a fresh one, which a tick closes too.
func TestAlarmTicks(t *testing.T) {
	var a alarm
	c := a.next(time.Millisecond)
	if a.next(time.Hour) != c {
		t.Fatal("a second wait before the tick got a channel of its own")
	}
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatal("the tick never closed its channel")
	}
	d := a.next(time.Millisecond)
	if d == c {
		t.Fatal("a wait after the tick got its closed channel")
	}
	select {
	case <-d:
	case <-time.After(30 * time.Second):
		t.Fatal("the next tick never closed its channel")
	}
}

// TestTickOf: a tick is a 16th of the timeout, at least a millisecond.
func TestTickOf(t *testing.T) {
	for _, tc := range []struct{ timeout, tick time.Duration }{
		{time.Minute, time.Minute / 16}, {16 * time.Millisecond, time.Millisecond}, {time.Millisecond, time.Millisecond}, {0, time.Millisecond},
	} {
		if got := tickOf(tc.timeout); got != tc.tick {
			t.Errorf("tickOf(%v) = %v, want %v", tc.timeout, got, tc.tick)
		}
	}
}
