package tokenize

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// bpe is a byte-level BPE model: merges apply to token ids, lowest rank
// first and leftmost first among equals, as Hugging Face tokenizers do.
// Results per pre-token are cached.
type bpe struct {
	vocab        map[string]uint32
	rawVocab     map[string]uint32 // by raw bytes, for ignore_merges
	byteID       [256]uint32       // id of each single byte's spelling
	merges       mergeTable        // (left, right) -> (rank, merged id)
	byteRank     []uint32          // rank of merging bytes a, b at a<<8|b; noRank if none
	ignoreMerges bool              // a pre-token that is itself in the vocabulary is one token
	cache        pieceCache
}

func newBPE(m *modelJSON) (*bpe, error) {
	switch {
	case m.Type != "BPE":
		return nil, unsupported("model type %q (only BPE)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, unsupported("BPE dropout %v", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, unsupported("BPE continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, unsupported("BPE end_of_word_suffix %q", *m.EndOfWordSuffix)
	case m.ByteFallback:
		return nil, unsupported("BPE byte_fallback (SentencePiece-style models)")
	}
	b := &bpe{vocab: m.Vocab, ignoreMerges: m.IgnoreMerges}
	if b.ignoreMerges {
		b.rawVocab = make(map[string]uint32, len(m.Vocab))
		for s, id := range m.Vocab {
			if raw, ok := appendRawBytes(nil, s); ok {
				b.rawVocab[string(raw)] = id
			}
		}
	}
	for c := range 256 {
		id, ok := m.Vocab[string(byteToRune[c])]
		if !ok {
			return nil, unsupported("BPE vocabulary without byte %#02x: not a byte-level vocabulary", c)
		}
		b.byteID[c] = id
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b.merges = newMergeTable(len(pairs))
	for rank, p := range pairs {
		l, okL := m.Vocab[p[0]]
		r, okR := m.Vocab[p[1]]
		merged, okM := m.Vocab[p[0]+p[1]]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("%w: merge %d (%q %q) names tokens outside the vocabulary", ErrInvalid, rank, p[0], p[1])
		}
		if err := b.merges.add(l, r, uint32(rank), merged); err != nil {
			return nil, err
		}
	}
	// Every piece starts as bytes: the first round of lookups, about a
	// third of all, reads a 256 KB array instead of the hash table.
	b.byteRank = make([]uint32, 1<<16)
	for i := range b.byteRank {
		r, ok := b.merges.rank(b.byteID[i>>8], b.byteID[i&0xff])
		if !ok {
			r = noRank
		}
		b.byteRank[i] = r
	}
	return b, nil
}

// noRank marks a pair that does not merge.
const noRank = ^uint32(0)

// encodePiece appends the ids of one pre-token.
func (b *bpe) encodePiece(dst []uint32, piece string) []uint32 {
	if len(piece) == 1 {
		return append(dst, b.byteID[piece[0]])
	}
	if ids, ok := b.cache.get(piece); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = b.merge(dst, piece)
	b.cache.put(piece, dst[start:])
	return dst
}

// merge runs BPE on piece from single bytes: repeatedly the adjacent pair
// with the lowest merge rank, leftmost first among equals, becomes its
// merged token. Symbols form a linked list over arrays and candidate pairs
// wait in a min-heap ordered by (rank, position), built in one pass over
// the byte pairs; a popped pair whose symbols changed since it was pushed
// is skipped. O(n log n) table lookups and heap operations, with no
// allocation for pieces up to mergeStack bytes.
func (b *bpe) merge(dst []uint32, piece string) []uint32 {
	if b.ignoreMerges {
		if id, ok := b.rawVocab[piece]; ok {
			return append(dst, id)
		}
	}
	n := len(piece)
	var syms []uint32
	var next, prev []int32
	var h pairHeap
	if n <= mergeStack {
		sc := mergeScratchPool.Get().(*mergeScratch)
		defer mergeScratchPool.Put(sc)
		syms, next, prev, h = sc.syms[:n:n], sc.next[:n:n], sc.prev[:n:n], pairHeap(sc.heap[:0])
	} else {
		syms, next, prev, h = make([]uint32, n), make([]int32, n), make([]int32, n), make(pairHeap, 0, 3*n)
	}
	for i := range n {
		syms[i], next[i], prev[i] = b.byteID[piece[i]], int32(i+1), int32(i-1)
	}
	next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		if rank := b.byteRank[uint16(piece[i])<<8|uint16(piece[i+1])]; rank != noRank {
			h = append(h, newPairCand(rank, int32(i), syms[i], syms[i+1]))
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		pos := c.pos()
		r := next[pos]
		if syms[pos] != c.left || r < 0 || syms[r] != c.right || prev[pos] == -2 {
			continue // stale: a symbol of this pair was merged away
		}
		syms[pos] = b.merges.merged[c.rank()]
		nr := next[r]
		next[pos] = nr
		if nr >= 0 {
			prev[nr] = pos
		}
		prev[r] = -2 // dead
		if p := prev[pos]; p >= 0 {
			if rank, ok := b.merges.rank(syms[p], syms[pos]); ok {
				h.push(newPairCand(rank, p, syms[p], syms[pos]))
			}
		}
		if nr >= 0 {
			if rank, ok := b.merges.rank(syms[pos], syms[nr]); ok {
				h.push(newPairCand(rank, pos, syms[pos], syms[nr]))
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, syms[i])
	}
	return dst
}

// mergeStack is the longest piece merged without allocating.
const mergeStack = 256

// mergeScratch is merge's working memory, pooled: as locals the arrays would
// escape to the heap (the heap slice is appended through a pointer).
type mergeScratch struct {
	syms       [mergeStack]uint32
	next, prev [mergeStack]int32
	heap       [3 * mergeStack]pairCand // stale entries wait in the heap too
}

var mergeScratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// pairCand is a pair that may merge: its rank and the position of its left
// symbol in one key (rank high, position low, so one comparison orders by
// rank, then leftmost), and both symbols as they were when it was pushed.
type pairCand struct {
	key         uint64
	left, right uint32
}

func newPairCand(rank uint32, pos int32, left, right uint32) pairCand {
	return pairCand{key: uint64(rank)<<32 | uint64(uint32(pos)), left: left, right: right}
}

func (c pairCand) rank() uint32 { return uint32(c.key >> 32) }
func (c pairCand) pos() int32   { return int32(uint32(c.key)) }

// pairHeap is a binary min-heap by key.
type pairHeap []pairCand

// init orders a heap filled by append, in O(n).
func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c pairCand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[i].key >= s[p].key {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *pairHeap) pop() pairCand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	s.down(0)
	*h = s
	return top
}

func (h pairHeap) down(i int) {
	for {
		l, m := 2*i+1, i
		if l < len(h) && h[l].key < h[m].key {
			m = l
		}
		if l+1 < len(h) && h[l+1].key < h[m].key {
			m = l + 1
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// mergeTable is an open-addressing hash table from a token pair to its merge
// rank, in 8-byte slots (left 20 bits | right 20 bits | rank 24 bits), so the
// table for 150k merges is 4 MB and stays in cache far better than a Go map.
// The merged token comes from a rank-indexed array, read once per merge.
// BPE on a long piece (a run of CJK characters) makes a few lookups per
// byte, so this is its inner loop.
type mergeTable struct {
	slots  []uint64
	merged []uint32 // by rank
	shift  uint
}

const (
	emptySlot    = ^uint64(0)
	maxMergeID   = 1<<20 - 1
	maxMergeRank = 1<<24 - 2
)

func newMergeTable(n int) mergeTable {
	size, shift := 1024, uint(64-10)
	for size < 2*n {
		size, shift = size*2, shift-1
	}
	t := mergeTable{slots: make([]uint64, size), merged: make([]uint32, n), shift: shift}
	for i := range t.slots {
		t.slots[i] = emptySlot
	}
	return t
}

func (t *mergeTable) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// add records a merge; a pair already present keeps its first (lower) rank.
func (t *mergeTable) add(l, r, rank, merged uint32) error {
	if l > maxMergeID || r > maxMergeID || merged > maxMergeID || rank > maxMergeRank {
		return unsupported("vocabulary of more than %d tokens or more than %d merges", maxMergeID+1, maxMergeRank+1)
	}
	key := uint64(l)<<20 | uint64(r)
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		switch s := t.slots[i]; {
		case s == emptySlot:
			t.slots[i] = key<<24 | uint64(rank)
			t.merged[rank] = merged
			return nil
		case s>>24 == key:
			return nil
		}
	}
}

// rank returns the merge rank of (l, r) without the merged token.
func (t *mergeTable) rank(l, r uint32) (uint32, bool) {
	if l > maxMergeID || r > maxMergeID {
		return 0, false
	}
	key := uint64(l)<<20 | uint64(r)
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == emptySlot {
			return 0, false
		}
		if s>>24 == key {
			return uint32(s & (1<<24 - 1)), true
		}
	}
}

// pieceCache maps pre-tokens to their ids. It is a two-way set-associative
// table of atomic pointers: a lookup is one hash and at most two atomic
// loads, with no lock to contend on; an insert into a full set replaces one
// entry, so the cache is bounded whatever the input.
type pieceCache struct {
	slots [pieceCacheSlots]atomic.Pointer[pieceEntry]
}

type pieceEntry struct {
	piece string
	ids   []uint32
}

const (
	pieceCacheSlots = 1 << 16
	// pieceCacheMax is the longest piece cached: longer ones (runs of CJK
	// characters, long identifiers) rarely repeat.
	pieceCacheMax = 48
)

func (c *pieceCache) ways(s string) (a, b *atomic.Pointer[pieceEntry]) {
	h := xxh3.HashString(s)
	return &c.slots[h&(pieceCacheSlots-1)], &c.slots[(h>>32)&(pieceCacheSlots-1)]
}

func (c *pieceCache) get(s string) ([]uint32, bool) {
	a, b := c.ways(s)
	if e := a.Load(); e != nil && e.piece == s {
		return e.ids, true
	}
	if e := b.Load(); e != nil && e.piece == s {
		return e.ids, true
	}
	return nil, false
}

func (c *pieceCache) put(s string, ids []uint32) {
	if len(s) > pieceCacheMax {
		return
	}
	// A clone: s may point into a large request.
	e := &pieceEntry{piece: strings.Clone(s), ids: append([]uint32(nil), ids...)}
	a, b := c.ways(s)
	switch {
	case a.Load() == nil:
		a.Store(e)
	case b.Load() == nil:
		b.Store(e)
	default: // both taken: the second way takes the newcomer
		b.Store(e)
	}
}
