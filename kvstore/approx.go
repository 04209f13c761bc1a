package kvstore

// approxLRU orders a slot's approximate blocks by last use, for the capacity
// bound and the TTL. It is a FIFO of (hash, seq, time) records plus the seq of
// each hash's latest record: refreshing a block appends a new record, and a
// popped record whose seq is not the latest is simply dropped. Amortised
// O(1) per block, no pointers in the queue.
type approxLRU struct {
	latest map[uint64]uint64 // hash -> seq of its newest record
	queue  []approxRec
	head   int
	seq    uint64
}

type approxRec struct {
	hash uint64
	seq  uint64
	at   int64 // unix nanoseconds of the use
}

func (a *approxLRU) len() int { return len(a.latest) }

func (a *approxLRU) touch(h uint64, now int64) {
	if a.latest == nil {
		a.latest = make(map[uint64]uint64)
	}
	a.seq++
	a.latest[h] = a.seq
	a.queue = append(a.queue, approxRec{hash: h, seq: a.seq, at: now})
	if live := len(a.queue) - a.head; live > 2*len(a.latest)+1024 {
		a.compact()
	}
}

// popOldest removes the least recently used block whose last use is before
// cutoff (or any, when force), returning it.
func (a *approxLRU) popOldest(cutoff int64, force bool) (uint64, bool) {
	for a.head < len(a.queue) {
		r := a.queue[a.head]
		if !force && r.at >= cutoff {
			return 0, false
		}
		a.head++
		if a.latest[r.hash] == r.seq {
			delete(a.latest, r.hash)
			return r.hash, true
		}
	}
	return 0, false
}

// compact drops superseded records so the queue stays within a constant
// factor of the live blocks.
func (a *approxLRU) compact() {
	q := a.queue[:0]
	for _, r := range a.queue[a.head:] {
		if a.latest[r.hash] == r.seq {
			q = append(q, r)
		}
	}
	a.queue, a.head = q, 0
}

// RecordApprox records that the router sent a prompt whose blocks are hashes
// to slot, for an engine that publishes no KV events. Matching counts these
// blocks like GPU blocks but reports them apart (Match.Approx). Blocks live
// for Options.ApproxTTL after their last use and at most ApproxMaxBlocks per
// slot, least recently used leaving first. Slots that have received precise
// events ignore it: their events are the truth. For those it returns at
// once, without taking the lock (see Precise), so a router may call it on
// every decision; otherwise it does not allocate once the slot's queue has
// grown to its working size.
func (ix *Index) RecordApprox(slot Slot, hashes []uint64) error {
	if ix.Precise(slot) {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.checkSlot(slot); err != nil {
		return err
	}
	st := &ix.slots[slot]
	if st.precise {
		return nil
	}
	now := ix.opts.Now().UnixNano()
	for _, h := range hashes {
		st.approx.touch(h, now)
		ix.store(slot, TierApprox, h)
	}
	limit := ix.approxLimit(st)
	for st.approx.len() > limit {
		h, _ := st.approx.popOldest(0, true)
		ix.removeBlock(slot, TierApprox, h)
	}
	return nil
}

func (ix *Index) approxLimit(st *slotState) int {
	switch {
	case ix.opts.ApproxMaxBlocks > 0:
		return ix.opts.ApproxMaxBlocks
	case st.capacity[TierGPU] > 0:
		return int(min(st.capacity[TierGPU], MaxApproxBlocks))
	}
	return DefaultApproxMaxBlocks
}

// MaxApproxBlocks caps the approximate blocks of a slot whatever its capacity.
const MaxApproxBlocks = 1 << 24

// ExpireApprox removes approximate blocks unused for longer than the TTL and
// returns how many left. The router calls it periodically, so an entry
// outlives its TTL by at most that period.
func (ix *Index) ExpireApprox() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	cutoff := ix.opts.Now().Add(-ix.opts.ApproxTTL).UnixNano()
	n := 0
	for s := range ix.slots {
		st := &ix.slots[s]
		if !st.inUse {
			continue
		}
		for {
			h, ok := st.approx.popOldest(cutoff, false)
			if !ok {
				break
			}
			ix.removeBlock(Slot(s), TierApprox, h)
			n++
		}
	}
	return n
}
