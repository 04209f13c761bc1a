package cluster

import (
	"container/list"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/workload"
)

// PooledLRU is the hit rate of the ideal a placement can approach: one
// cache of capacity blocks holding every engine's share, least recently
// used block leaving first, fed the workload's prompts in arrival order
// with no queueing, no blocks pinned by running requests and nothing but
// prompts cached. A prompt hits its leading run of cached blocks, counted
// as an engine counts them (at most (length-1)/B blocks: one token is
// always computed); then all its full blocks become the most recent, its
// first block most of all, as an engine releases a prompt tail first so
// that what others share leaves last. It returns cached prompt tokens over
// all prompt tokens.
func PooledLRU(wl *workload.Workload, hc kvstore.HashConfig, capacity int) (float64, error) {
	h, err := kvstore.NewHasher(hc)
	if err != nil {
		return 0, err
	}
	lru := newBlockLRU(capacity)
	var hs []uint64
	cached, total := 0, 0
	for _, r := range wl.Requests {
		if hs, err = h.Hash(hs[:0], r.Prompt, nil); err != nil {
			return 0, err
		}
		limit := min(len(hs), (len(r.Prompt)-1)/hc.BlockSize)
		hit := 0
		for hit < limit && lru.has(hs[hit]) {
			hit++
		}
		cached += hit * hc.BlockSize
		total += len(r.Prompt)
		for i := len(hs) - 1; i >= 0; i-- {
			lru.use(hs[i])
		}
	}
	if total == 0 {
		return 0, nil
	}
	return float64(cached) / float64(total), nil
}

// blockLRU is a set of block hashes bounded by a capacity, least recently
// used leaving first.
type blockLRU struct {
	cap   int
	order *list.List // of uint64, front = least recently used
	elems map[uint64]*list.Element
}

func newBlockLRU(capacity int) *blockLRU {
	return &blockLRU{cap: capacity, order: list.New(), elems: make(map[uint64]*list.Element)}
}

func (l *blockLRU) has(h uint64) bool { _, ok := l.elems[h]; return ok }

// use makes h the most recently used, adding it (and evicting the least
// recently used when full) if absent.
func (l *blockLRU) use(h uint64) {
	if l.cap <= 0 {
		return
	}
	if e, ok := l.elems[h]; ok {
		l.order.MoveToBack(e)
		return
	}
	if len(l.elems) >= l.cap {
		front := l.order.Front()
		delete(l.elems, front.Value.(uint64))
		l.order.Remove(front)
	}
	l.elems[h] = l.order.PushBack(h)
}
