package sim

import (
	"container/list"
	"fmt"
)

// cpuPool is the bounded CPU tier: block hashes evicted from the GPU, least
// recently used leaving first.
type cpuPool struct {
	cap     int
	order   *list.List // of uint64, front = least recently used
	entries map[uint64]cpuEntry
}

type cpuEntry struct {
	elem      *list.Element
	parent    uint64
	hasParent bool
}

func newCPUPool(capacity int) cpuPool {
	return cpuPool{cap: capacity, order: list.New(), entries: make(map[uint64]cpuEntry)}
}

func (p *cpuPool) has(h uint64) bool { _, ok := p.entries[h]; return ok }

// touch marks h as just used.
func (p *cpuPool) touch(h uint64) {
	if e, ok := p.entries[h]; ok {
		p.order.MoveToBack(e.elem)
	}
}

// add inserts h, evicting the least recently used entry when full.
func (p *cpuPool) add(h, parent uint64, hasParent bool) (evicted uint64, ok bool) {
	if len(p.entries) >= p.cap {
		front := p.order.Front()
		evicted, ok = front.Value.(uint64), true
		p.order.Remove(front)
		delete(p.entries, evicted)
	}
	p.entries[h] = cpuEntry{elem: p.order.PushBack(h), parent: parent, hasParent: hasParent}
	return evicted, ok
}

func (p *cpuPool) check() error {
	if p.order.Len() != len(p.entries) || len(p.entries) > max(p.cap, 0) {
		return fmt.Errorf("sim: cpu pool holds %d in order, %d in map, cap %d", p.order.Len(), len(p.entries), p.cap)
	}
	return nil
}
