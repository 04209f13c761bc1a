package kvstore

// prefetchGroup is how many blocks Match and Apply ask for at a time, one
// group ahead of the blocks they work on.
const prefetchGroup = 16

// prefetchRuns asks for the cache lines where the probe runs of hs (at most
// prefetchGroup hashes) start: each home entry's line and, with next set,
// the line after it, where Robin Hood inserts and deletes shift entries.
// The result is only for the fallback's loads; callers keep it somewhere
// so those loads are not optimised away.
func (ix *Index) prefetchRuns(hs []uint64, next bool) uint64 {
	var ps [2 * prefetchGroup]*entry
	k := 0
	for _, h := range hs[:min(len(hs), prefetchGroup)] {
		t := &ix.shards[h>>(64-shardBits)]
		n := len(t.entries)
		if n == 0 {
			continue
		}
		j := t.home(h)
		ps[k] = &t.entries[j]
		k++
		if next {
			ps[k] = &t.entries[min(j+entriesPerLine, n-1)]
			k++
		}
	}
	return prefetch(ps[:k])
}

// entriesPerLine is how many entries one 64-byte cache line holds.
const entriesPerLine = 64 / entrySize
