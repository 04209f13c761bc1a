package sim

import (
	"errors"
	"time"
)

// DefaultLoRALoadTime is what loading one adapter into a slot costs when
// the flag does not say. A rank-16 adapter on every projection of an 8B
// model is about 40 MB of safetensors; read from a local NVMe disk
// (~2 GB/s) and copied over PCIe it takes some 20-50 ms, the tens of
// milliseconds S-LoRA (Sheng et al., 2023) and dLoRA (Wu et al., OSDI
// 2024) report for swapping an adapter in. 50 ms takes the slow end: a
// cold read, not a host-memory copy.
const DefaultLoRALoadTime = 50 * time.Millisecond

// ErrNoLoRASlot is Acquire's answer when every slot holds an adapter that a
// running request uses: the request waits for a Release.
var ErrNoLoRASlot = errors.New("sim: every LoRA slot is in use")

// LoRASlots is one rank's adapter residency: at most Slots adapters
// resident at once (vLLM's --max-loras), a load taking LoadTime, and the
// least recently used adapter that no request holds evicted to free a slot.
// Time is the caller's (virtual in perf/cluster, the wall clock in the
// server), so the same model serves both. Not safe for concurrent use.
type LoRASlots struct {
	slots    int
	loadTime time.Duration
	resident map[uint32]*loraSlot
	tick     uint64
	// Loads and Evictions count what happened, for reports.
	Loads, Evictions int
}

type loraSlot struct {
	readyAt time.Duration // the load completes then
	lastUse uint64
	users   int
}

// NewLoRASlots returns slots empty slots whose loads take loadTime
// (slots <= 0: one).
func NewLoRASlots(slots int, loadTime time.Duration) *LoRASlots {
	return &LoRASlots{slots: max(slots, 1), loadTime: loadTime, resident: map[uint32]*loraSlot{}}
}

// Slots is how many adapters fit at once.
func (l *LoRASlots) Slots() int { return l.slots }

// LoadTime is what one load takes.
func (l *LoRASlots) LoadTime() time.Duration { return l.loadTime }

// Resident reports whether id is resident (or loading).
func (l *LoRASlots) Resident(id uint32) bool { _, ok := l.resident[id]; return ok }

// IDs appends the resident adapters to dst, in no order.
func (l *LoRASlots) IDs(dst []uint32) []uint32 {
	for id := range l.resident {
		dst = append(dst, id)
	}
	return dst
}

// Acquire holds adapter id for one request at now. It returns when the
// adapter is ready (now when resident, later while it loads), whether this
// call started a load, and the adapter evicted for it (0: none). With every
// slot held by running requests it fails with ErrNoLoRASlot and changes
// nothing.
func (l *LoRASlots) Acquire(id uint32, now time.Duration) (ready time.Duration, loaded bool, evicted uint32, err error) {
	l.tick++
	if s, ok := l.resident[id]; ok {
		s.users++
		s.lastUse = l.tick
		return max(s.readyAt, now), false, 0, nil
	}
	if len(l.resident) >= l.slots {
		var victim *loraSlot
		for vid, s := range l.resident {
			if s.users == 0 && (victim == nil || s.lastUse < victim.lastUse) {
				victim, evicted = s, vid
			}
		}
		if victim == nil {
			return 0, false, 0, ErrNoLoRASlot
		}
		delete(l.resident, evicted)
		l.Evictions++
	}
	l.Loads++
	s := &loraSlot{readyAt: now + l.loadTime, lastUse: l.tick, users: 1}
	l.resident[id] = s
	return s.readyAt, true, evicted, nil
}

// Release ends one request's hold on id.
func (l *LoRASlots) Release(id uint32) {
	if s, ok := l.resident[id]; ok && s.users > 0 {
		s.users--
	}
}
