package sim

import (
	"errors"
	"testing"
	"time"
)

func TestLoRASlots(t *testing.T) {
	ms := time.Millisecond
	l := NewLoRASlots(2, 50*ms)
	type want struct {
		ready   time.Duration
		loaded  bool
		evicted uint32
		err     error
	}
	step := func(name string, id uint32, now time.Duration, w want) {
		t.Helper()
		ready, loaded, evicted, err := l.Acquire(id, now)
		if !errors.Is(err, w.err) || err == nil && (ready != w.ready || loaded != w.loaded || evicted != w.evicted) {
			t.Fatalf("%s: ready %v loaded %v evicted %d err %v, want %+v", name, ready, loaded, evicted, err, w)
		}
	}
	step("cold", 1, 0, want{ready: 50 * ms, loaded: true})
	step("while loading", 1, 10*ms, want{ready: 50 * ms})
	step("second slot", 2, 20*ms, want{ready: 70 * ms, loaded: true})
	step("every slot held", 3, 80*ms, want{err: ErrNoLoRASlot})
	l.Release(1)
	l.Release(1)
	step("resident", 2, 90*ms, want{ready: 90 * ms})
	step("evicts the idle one", 3, 100*ms, want{ready: 150 * ms, loaded: true, evicted: 1})
	if l.Resident(1) || !l.Resident(2) || !l.Resident(3) || l.Loads != 3 || l.Evictions != 1 {
		t.Fatalf("resident %v, loads %d, evictions %d", l.IDs(nil), l.Loads, l.Evictions)
	}
	l.Release(2)
	l.Release(2)
	l.Release(3)
	step("least recently used goes", 1, 200*ms, want{ready: 250 * ms, loaded: true, evicted: 2})
}
