package tokenize

// pairQueue is the queue of a piece's mergeable pairs during BPE: an
// indexed binary min-heap with at most one entry per position (the pair of
// the symbol there and its right neighbour), keyed rank<<32 | position, so
// the minimum is the lowest-ranked pair, leftmost among equals. A merge
// updates or removes the entries it changes in place, so nothing stale is
// ever popped and the heap holds at most one entry per live symbol.
type pairQueue struct {
	keys  []uint64 // the heap
	where []int32  // position -> index in keys, or -1
}

func pairKey(rank uint32, pos int32) uint64 { return uint64(rank)<<32 | uint64(uint32(pos)) }

func keyPos(k uint64) int32 { return int32(uint32(k)) }

// init orders keys after they were appended with where set, in O(n).
func (q *pairQueue) init() {
	for i := len(q.keys)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// min returns the lowest entry; the queue must not be empty.
func (q *pairQueue) min() (rank uint32, pos int32) {
	k := q.keys[0]
	return uint32(k >> 32), keyPos(k)
}

// set gives the pair at pos the rank, adding it if absent.
func (q *pairQueue) set(pos int32, rank uint32) {
	k := pairKey(rank, pos)
	i := int(q.where[pos])
	if i < 0 {
		q.keys = append(q.keys, k)
		i = len(q.keys) - 1
		q.where[pos] = int32(i)
		q.up(i)
		return
	}
	old := q.keys[i]
	q.keys[i] = k
	if k < old {
		q.up(i)
	} else {
		q.down(i)
	}
}

// remove drops the pair at pos, if queued.
func (q *pairQueue) remove(pos int32) {
	i := int(q.where[pos])
	if i < 0 {
		return
	}
	q.where[pos] = -1
	last := len(q.keys) - 1
	if i == last {
		q.keys = q.keys[:last]
		return
	}
	moved := q.keys[last]
	q.keys[i] = moved
	q.keys = q.keys[:last]
	q.where[keyPos(moved)] = int32(i)
	q.up(i)
	q.down(int(q.where[keyPos(moved)]))
}

// put stores k at heap index i and records where its position went.
func (q *pairQueue) put(i int, k uint64) {
	q.keys[i] = k
	q.where[keyPos(k)] = int32(i)
}

// up moves the key at i towards the root past larger parents.
func (q *pairQueue) up(i int) {
	k := q.keys[i]
	for i > 0 && k < q.keys[(i-1)/2] {
		q.put(i, q.keys[(i-1)/2])
		i = (i - 1) / 2
	}
	q.put(i, k)
}

// down moves the key at i towards the leaves past smaller children.
func (q *pairQueue) down(i int) {
	n := len(q.keys)
	k := q.keys[i]
	for {
		c := 2*i + 1
		if c+1 < n && q.keys[c+1] < q.keys[c] {
			c++
		}
		if c >= n || q.keys[c] >= k {
			break
		}
		q.put(i, q.keys[c])
		i = c
	}
	q.put(i, k)
}
