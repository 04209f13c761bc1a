package sim

import (
	"container/list"
	"fmt"

	"github.com/kvgate/kvgate/kvstore"
)

// tierPool is one bounded lower tier (CPU memory or disk): block hashes
// offloaded from the tier above, least recently used leaving first, as
// vLLM's LRUOffloadingManager (vllm/v1/kv_offload/lru_manager.py) keeps its
// CPU blocks in an OrderedDict and evicts from its front. A block loaded
// back up leaves the pool (blockManager.raise), so the tiers hold distinct
// blocks.
type tierPool struct {
	tier    kvstore.Tier
	cap     int
	order   *list.List // of uint64, front = least recently used
	entries map[uint64]tierEntry
}

type tierEntry struct {
	elem      *list.Element
	parent    uint64
	hasParent bool
}

// offloaded is a block leaving a tier: what the tier below needs to take it.
type offloaded struct {
	hash, parent uint64
	hasParent    bool
}

func newTierPool(tier kvstore.Tier, capacity int) tierPool {
	return tierPool{tier: tier, cap: capacity, order: list.New(), entries: make(map[uint64]tierEntry)}
}

func (p *tierPool) has(h uint64) bool { _, ok := p.entries[h]; return ok }

// touch marks h as just used.
func (p *tierPool) touch(h uint64) {
	if e, ok := p.entries[h]; ok {
		p.order.MoveToBack(e.elem)
	}
}

// add inserts b, evicting the least recently used entry when full; the
// evicted block is returned so that it can move a tier further down.
func (p *tierPool) add(b offloaded) (evicted offloaded, ok bool) {
	if len(p.entries) >= p.cap {
		front := p.order.Front()
		h := front.Value.(uint64)
		e := p.entries[h]
		evicted, ok = offloaded{hash: h, parent: e.parent, hasParent: e.hasParent}, true
		p.order.Remove(front)
		delete(p.entries, h)
	}
	p.entries[b.hash] = tierEntry{elem: p.order.PushBack(b.hash), parent: b.parent, hasParent: b.hasParent}
	return evicted, ok
}

// stored appends the pool's blocks to out as STORED events.
func (p *tierPool) stored(out []kvstore.Event) []kvstore.Event {
	for h, e := range p.entries {
		out = append(out, kvstore.Event{Kind: kvstore.Stored, Tier: p.tier, HasParent: e.hasParent, Parent: e.parent, Hashes: []uint64{h}})
	}
	return out
}

func (p *tierPool) check() error {
	if p.order.Len() != len(p.entries) || len(p.entries) > max(p.cap, 0) {
		return fmt.Errorf("sim: %s pool holds %d in order, %d in map, cap %d", p.tier, p.order.Len(), len(p.entries), p.cap)
	}
	return nil
}

// remove takes h out of the pool; false if it was not there.
func (p *tierPool) remove(h uint64) bool {
	e, ok := p.entries[h]
	if ok {
		p.order.Remove(e.elem)
		delete(p.entries, h)
	}
	return ok
}
