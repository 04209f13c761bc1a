package sim

import (
	"fmt"

	"github.com/kvgate/kvgate/kvstore"
)

// blockManager is a paged KV cache with prefix caching, in the manner of
// vLLM's block pool. GPU blocks are reference-counted while requests use
// them; a full block gets its chained hash and enters the prefix cache; a
// block no request uses stays cached on the free list, least recently used
// first, until a new allocation evicts it. Evicted cached blocks move
// down: to an optional bounded CPU pool, and what the CPU pool evicts to an
// optional bounded disk pool (with no CPU pool, GPU evictions go to disk),
// as vLLM's offloading connector stores GPU blocks in CPU memory and LMCache
// cascades its local CPU backend into its local disk backend. A later
// request loads a block from the best tier holding it instead of
// recomputing it, moving it up (raise). Every change of a tier's set is
// recorded as a KV event of that tier.
type blockManager struct {
	blocks []block
	free   lruList // GPU blocks with ref == 0, eviction order
	cached map[uint64]int32
	cpu    tierPool
	disk   tierPool
	events []kvstore.Event
	// groups, for a hybrid model (hybrid.go), are the prefix caches of its
	// KV cache groups, one map each over the one pool of blocks, as vLLM's
	// BlockPool keys cached blocks by (hash, group); cached is then the
	// map of the first full-attention group.
	groups []map[uint64]int32
}

type block struct {
	hash      uint64
	parent    uint64
	hasParent bool
	hashed    bool
	group     uint16 // the KV cache group a hashed block caches
	ref       int32
	prev      int32 // free-list links
	next      int32
	onFree    bool
}

func newBlockManager(gpuBlocks, cpuBlocks, diskBlocks int) *blockManager {
	m := &blockManager{blocks: make([]block, gpuBlocks), cached: make(map[uint64]int32),
		cpu: newTierPool(kvstore.TierCPU, cpuBlocks), disk: newTierPool(kvstore.TierDisk, diskBlocks)}
	m.free.init(m.blocks)
	for i := range m.blocks {
		m.free.pushBack(m.blocks, int32(i))
	}
	return m
}

// capacity returns the GPU blocks in the pool.
func (m *blockManager) capacity() int { return len(m.blocks) }

// freeBlocks returns blocks an allocation can take (free or evictable).
func (m *blockManager) freeBlocks() int { return m.free.n }

// lookupGPU returns the cached GPU block of h.
func (m *blockManager) lookupGPU(h uint64) (int32, bool) {
	b, ok := m.cached[h]
	return b, ok
}

// acquire takes a reference on a cached block, taking it off the free list.
func (m *blockManager) acquire(b int32) {
	blk := &m.blocks[b]
	if blk.ref == 0 {
		m.free.remove(m.blocks, b)
	}
	blk.ref++
}

// allocate takes a free block for new content, evicting the least recently
// used cached block if it must. ok is false when every block is in use.
func (m *blockManager) allocate() (int32, bool) {
	b := m.free.head
	if b < 0 {
		return -1, false
	}
	m.free.remove(m.blocks, b)
	blk := &m.blocks[b]
	if blk.hashed {
		m.evict(blk)
	}
	*blk = block{ref: 1, prev: -1, next: -1}
	return b, true
}

func (m *blockManager) evict(blk *block) {
	if m.groups != nil {
		delete(m.groups[blk.group], blk.hash)
		m.events = append(m.events, kvstore.Event{Kind: kvstore.Removed, Tier: kvstore.TierGPU, Group: blk.group, Hashes: []uint64{blk.hash}})
		return // a hybrid model has no lower tiers
	}
	delete(m.cached, blk.hash)
	m.events = append(m.events, kvstore.Event{Kind: kvstore.Removed, Tier: kvstore.TierGPU, Hashes: []uint64{blk.hash}})
	b := offloaded{hash: blk.hash, parent: blk.parent, hasParent: blk.hasParent}
	if m.cpu.cap > 0 {
		m.offload(&m.cpu, b)
	} else {
		m.offload(&m.disk, b)
	}
}

// offload stores b in pool p unless p holds it already (or has no room at
// all); what p evicts for it moves on to the disk pool, or leaves.
func (m *blockManager) offload(p *tierPool, b offloaded) {
	if p.cap <= 0 || p.has(b.hash) {
		return
	}
	old, evicted := p.add(b)
	if evicted {
		m.events = append(m.events, kvstore.Event{Kind: kvstore.Removed, Tier: p.tier, Hashes: []uint64{old.hash}})
	}
	m.events = append(m.events, kvstore.Event{Kind: kvstore.Stored, Tier: p.tier,
		HasParent: b.hasParent, Parent: b.parent, Hashes: []uint64{b.hash}})
	if evicted && p.tier == kvstore.TierCPU {
		m.offload(&m.disk, old)
	}
}

// lower returns the lower tier holding h, CPU before disk.
func (m *blockManager) lower(h uint64) (kvstore.Tier, bool) {
	switch {
	case m.cpu.has(h):
		return kvstore.TierCPU, true
	case m.disk.has(h):
		return kvstore.TierDisk, true
	}
	return 0, false
}

// heldRun returns how many leading hashes of hs some tier holds, and marks
// those of the run in lower tiers just used there, last first, so that the
// run's head is the most recent (as vLLM's LRUOffloadingManager.touch
// does) and the allocations that load the run push out other blocks, not
// the run's own.
func (m *blockManager) heldRun(hs []uint64) int {
	n := 0
	for n < len(hs) && m.holds(hs[n]) {
		n++
	}
	for i := n - 1; i >= 0; i-- {
		m.cpu.touch(hs[i])
		m.disk.touch(hs[i])
	}
	return n
}

// raise takes h out of lower tier t once it is loaded into the GPU: the
// tiers are exclusive, so that a tier of N blocks adds N distinct blocks to
// the cache (the pooled ideal a router is measured against counts them so).
// vLLM's offloading connector keeps the CPU copy instead; on the Mooncake
// trace, 8 engines of 16,384 GPU blocks, keeping it left kv a hit rate of
// 0.349 against 0.374 with 16,384 CPU blocks each (pooled ideal 0.391) and
// 0.555 against 0.576 with 65,536 (0.594).
func (m *blockManager) raise(t kvstore.Tier, h uint64) {
	p := &m.cpu
	if t == kvstore.TierDisk {
		p = &m.disk
	}
	if p.remove(h) {
		m.events = append(m.events, kvstore.Event{Kind: kvstore.Removed, Tier: t, Hashes: []uint64{h}})
	}
}

// holds reports whether any tier holds h.
func (m *blockManager) holds(h uint64) bool {
	_, gpu := m.cached[h]
	return gpu || m.cpu.has(h) || m.disk.has(h)
}

// commit registers a full block under its hash. If another block already
// holds that content (two requests computed it at once), this one stays
// uncached, as in vLLM.
func (m *blockManager) commit(b int32, h, parent uint64, hasParent bool) {
	if _, dup := m.cached[h]; dup {
		return
	}
	blk := &m.blocks[b]
	blk.hash, blk.parent, blk.hasParent, blk.hashed = h, parent, hasParent, true
	m.cached[h] = b
	m.events = append(m.events, kvstore.Event{Kind: kvstore.Stored, Tier: kvstore.TierGPU,
		HasParent: hasParent, Parent: parent, Hashes: []uint64{h}})
}

// release drops a request's references, last block first, so that the tail
// of a prompt is evicted before its head (its head is what others share).
// Blocks without a hash are worthless and go to the front of the free list.
func (m *blockManager) release(table []int32) {
	for i := len(table) - 1; i >= 0; i-- {
		b := table[i]
		blk := &m.blocks[b]
		if blk.ref--; blk.ref > 0 {
			continue
		}
		if blk.hashed {
			m.free.pushBack(m.blocks, b)
		} else {
			m.free.pushFront(m.blocks, b)
		}
	}
}

// takeEvents returns and clears the pending events, merging runs of one
// tier's STORED blocks that form a chain, and runs of REMOVED blocks.
func (m *blockManager) takeEvents() []kvstore.Event {
	evs := m.events
	m.events = nil
	out := evs[:0]
	for _, ev := range evs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			chain := ev.Kind == kvstore.Stored && ev.HasParent && last.Kind == kvstore.Stored &&
				last.Hashes[len(last.Hashes)-1] == ev.Parent
			removals := ev.Kind == kvstore.Removed && last.Kind == kvstore.Removed
			if last.Tier == ev.Tier && last.Group == ev.Group && (chain || removals) {
				last.Hashes = append(last.Hashes, ev.Hashes...)
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

// snapshot returns the cached set as STORED events (GPU, CPU, then disk).
func (m *blockManager) snapshot() []kvstore.Event {
	if m.groups != nil {
		return m.groupSnapshot()
	}
	var out []kvstore.Event
	for h := range m.cached {
		blk := &m.blocks[m.cached[h]]
		out = append(out, kvstore.Event{Kind: kvstore.Stored, Tier: kvstore.TierGPU, HasParent: blk.hasParent, Parent: blk.parent, Hashes: []uint64{h}})
	}
	return m.disk.stored(m.cpu.stored(out))
}

// check verifies the pool's accounting: every block is either referenced or
// on the free list, refs match the request tables, and the cache map points
// at hashed blocks holding that hash.
func (m *blockManager) check(tables [][]int32) error {
	refs := make([]int32, len(m.blocks))
	for _, t := range tables {
		for _, b := range t {
			refs[b]++
		}
	}
	onFree := 0
	for b := m.free.head; b >= 0; b = m.blocks[b].next {
		onFree++
		if m.blocks[b].ref != 0 || !m.blocks[b].onFree {
			return fmt.Errorf("sim: free block %d has ref %d", b, m.blocks[b].ref)
		}
	}
	if onFree != m.free.n {
		return fmt.Errorf("sim: free list holds %d, counted %d", m.free.n, onFree)
	}
	used := 0
	for b := range m.blocks {
		blk := &m.blocks[b]
		if blk.ref != refs[b] {
			return fmt.Errorf("sim: block %d ref %d, request tables hold %d", b, blk.ref, refs[b])
		}
		if blk.ref > 0 {
			used++
			if blk.onFree {
				return fmt.Errorf("sim: block %d in use and on the free list", b)
			}
		}
	}
	if used+m.free.n != len(m.blocks) {
		return fmt.Errorf("sim: used %d + free %d != capacity %d", used, m.free.n, len(m.blocks))
	}
	maps := m.groups
	if maps == nil {
		maps = []map[uint64]int32{m.cached}
	}
	for g, cached := range maps {
		for h, b := range cached {
			if blk := &m.blocks[b]; !blk.hashed || blk.hash != h || (m.groups != nil && int(blk.group) != g) {
				return fmt.Errorf("sim: group %d cache entry %#x points at block %d holding %#x of group %d", g, h, b, blk.hash, blk.group)
			}
		}
	}
	if err := m.cpu.check(); err != nil {
		return err
	}
	return m.disk.check()
}

// lruList is an intrusive doubly linked list over block indices.
type lruList struct {
	head, tail int32
	n          int
}

func (l *lruList) init([]block) { l.head, l.tail = -1, -1 }

func (l *lruList) pushBack(bs []block, b int32) {
	bs[b].prev, bs[b].next, bs[b].onFree = l.tail, -1, true
	if l.tail >= 0 {
		bs[l.tail].next = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (l *lruList) pushFront(bs []block, b int32) {
	bs[b].prev, bs[b].next, bs[b].onFree = -1, l.head, true
	if l.head >= 0 {
		bs[l.head].prev = b
	} else {
		l.tail = b
	}
	l.head = b
	l.n++
}

func (l *lruList) remove(bs []block, b int32) {
	p, n := bs[b].prev, bs[b].next
	if p >= 0 {
		bs[p].next = n
	} else {
		l.head = n
	}
	if n >= 0 {
		bs[n].prev = p
	} else {
		l.tail = p
	}
	bs[b].prev, bs[b].next, bs[b].onFree = -1, -1, false
	l.n--
}
