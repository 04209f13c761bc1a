package tokenize

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// bpe is a BPE model: merges apply to token ids, lowest rank first and
// leftmost first among equals, as Hugging Face tokenizers do. A byte-level
// model (behind a ByteLevel pre-tokenizer) starts each piece from bytes; a
// SentencePiece-style one (chars non-nil) from characters, with byte
// fallback and the unknown token for characters outside the vocabulary.
// Results per pre-token are cached.
type bpe struct {
	vocab        *vocabTable
	longestRaw   int          // raw bytes of the longest token, for ignore_merges
	byteID       [256]uint32  // id of each single byte's spelling
	merges       mergeTable   // (left, right) -> (rank, merged id)
	byteRank     []uint32     // rank of merging bytes a, b at a<<8|b; noRank if none
	ignoreMerges bool         // a pre-token that is itself in the vocabulary is one token
	chars        *charSymbols // non-nil: symbols start as characters
	cache        pieceCache
}

func newBPE(m *modelJSON, byteLevel bool) (*bpe, error) {
	switch {
	case m.Type != "BPE":
		return nil, unsupported("model type %q (only BPE; Unigram, WordPiece and WordLevel are not implemented)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, unsupported("BPE dropout %v", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, unsupported("BPE continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, unsupported("BPE end_of_word_suffix %q", *m.EndOfWordSuffix)
	}
	var vocab map[string]uint32
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil || vocab == nil {
		return nil, fmt.Errorf("%w: BPE vocab is not an object of token ids", ErrInvalid)
	}
	b := &bpe{vocab: newVocabTable(vocab), ignoreMerges: m.IgnoreMerges}
	if byteLevel {
		if err := b.setBytes(); err != nil {
			return nil, err
		}
	} else {
		var err error
		if b.chars, err = newCharSymbols(b.vocab, m); err != nil {
			return nil, err
		}
	}
	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	b.merges = newMergeTable(len(pairs))
	for rank, p := range pairs {
		l, okL := vocab[p[0]]
		r, okR := vocab[p[1]]
		merged, okM := vocab[p[0]+p[1]]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("%w: merge %d (%q %q) names tokens outside the vocabulary", ErrInvalid, rank, p[0], p[1])
		}
		if err := b.merges.add(l, r, uint32(rank), merged); err != nil {
			return nil, err
		}
	}
	if byteLevel {
		b.setByteRanks()
	}
	return b, nil
}

// setBytes finds the id of every byte's spelling, which a byte-level
// vocabulary must have.
func (b *bpe) setBytes() error {
	if b.ignoreMerges {
		for s := range b.vocab.all() {
			b.longestRaw = max(b.longestRaw, utf8.RuneCountInString(s))
		}
	}
	for c := range 256 {
		id, ok := b.vocab.get(string(byteToRune[c]))
		if !ok {
			return unsupported("BPE vocabulary without byte %#02x: not a byte-level vocabulary", c)
		}
		b.byteID[c] = id
	}
	return nil
}

// setByteRanks fills the dense table of byte-pair ranks: every piece
// starts as bytes, so the first round of lookups, about a third of all,
// reads a 256 KB array instead of the hash table.
func (b *bpe) setByteRanks() {
	b.byteRank = make([]uint32, 1<<16)
	for i := range b.byteRank {
		r, ok := b.merges.rank(b.byteID[i>>8], b.byteID[i&0xff])
		if !ok {
			r = noRank
		}
		b.byteRank[i] = r
	}
}

// noRank marks a pair that does not merge.
const noRank = ^uint32(0)

// encodePiece appends the ids of one pre-token.
func (b *bpe) encodePiece(dst []uint32, piece string) []uint32 {
	if b.chars != nil {
		if b.chars.cutWords {
			for i := 0; i < len(piece); {
				e := b.chars.nextWord(piece, i)
				dst = b.encodeWord(dst, piece[i:e])
				i = e
			}
			return dst
		}
		return b.encodeWord(dst, piece)
	}
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

// encodeWord is encodePiece for a SentencePiece-style piece or part of one.
func (b *bpe) encodeWord(dst []uint32, word string) []uint32 {
	if ids, ok := b.cache.get(word); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = b.mergeChars(dst, word)
	b.cache.put(word, dst[start:])
	return dst
}

// merge runs BPE on piece from single bytes: repeatedly the adjacent pair
// with the lowest merge rank, leftmost first among equals, becomes its
// merged token. Symbols form a linked list over arrays; the pairs wait in a
// pairQueue built in one pass over a dense table of byte-pair ranks, and
// each merge updates the two pairs it changes. O(n log n) table lookups and
// heap steps, with no allocation for pieces up to mergeStack bytes.
func (b *bpe) merge(dst []uint32, piece string) []uint32 {
	n := len(piece)
	if b.ignoreMerges && n <= b.longestRaw {
		if id, ok := b.wholeToken(piece); ok {
			return append(dst, id)
		}
	}
	var syms []uint32
	var next, prev []int32
	var q pairQueue
	if n <= mergeStack {
		sc := mergeScratchPool.Get().(*mergeScratch)
		defer mergeScratchPool.Put(sc)
		syms, next, prev = sc.syms[:n:n], sc.next[:n:n], sc.prev[:n:n]
		q = pairQueue{keys: sc.keys[:0], where: sc.where[:n:n]}
	} else {
		syms, next, prev = make([]uint32, n), make([]int32, n), make([]int32, n)
		q = pairQueue{keys: make([]uint64, 0, n), where: make([]int32, n)}
	}
	for i := range n {
		syms[i], next[i], prev[i], q.where[i] = b.byteID[piece[i]], int32(i+1), int32(i-1), -1
	}
	next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		if rank := b.byteRank[uint16(piece[i])<<8|uint16(piece[i+1])]; rank != noRank {
			q.where[i] = int32(len(q.keys))
			q.keys = append(q.keys, pairKey(rank, int32(i)))
		}
	}
	q.init()
	return b.mergeQueued(dst, syms, next, prev, &q)
}

// wholeToken looks piece (raw bytes) up in the vocabulary by its
// byte-level spelling, as ignore_merges does before merging: at most two
// UTF-8 bytes a byte, spelled on the stack for pieces up to mergeStack
// bytes (gpt-oss's longest token is 128; merge looks up no piece longer
// than the longest token). It replaces a second map keyed by raw bytes,
// which cost gpt-oss 10 MB of heap.
func (b *bpe) wholeToken(piece string) (uint32, bool) {
	var stack [2 * mergeStack]byte
	buf := stack[:0]
	if len(piece) > mergeStack {
		buf = make([]byte, 0, 2*len(piece))
	}
	for i := 0; i < len(piece); i++ {
		buf = utf8.AppendRune(buf, byteToRune[piece[i]])
	}
	return b.vocab.getBytes(buf)
}

// mergeQueued merges the queued pairs of the symbol list syms (linked by
// next and prev, starting at 0) until none is left, and appends the result.
func (b *bpe) mergeQueued(dst, syms []uint32, next, prev []int32, q *pairQueue) []uint32 {
	for len(q.keys) > 0 {
		rank, pos := q.min()
		r := next[pos]
		syms[pos] = b.merges.merged[rank]
		nr := next[r]
		next[pos] = nr
		if nr >= 0 {
			prev[nr] = pos
		}
		q.remove(r) // its symbol is gone
		b.requeue(q, syms, pos, nr)
		if p := prev[pos]; p >= 0 {
			b.requeue(q, syms, p, pos)
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, syms[i])
	}
	return dst
}

// requeue sets the pair at l (with its right neighbour r, -1 for none) to
// its merge rank, or takes it out of the queue if it does not merge.
func (b *bpe) requeue(q *pairQueue, syms []uint32, l, r int32) {
	if r >= 0 {
		if rank, ok := b.merges.rank(syms[l], syms[r]); ok {
			q.set(l, rank)
			return
		}
	}
	q.remove(l)
}

// mergeStack is the longest piece merged without allocating.
const mergeStack = 256

// mergeScratch is merge's working memory, pooled: as locals the arrays would
// escape to the heap (the queue's slice is appended through a pointer).
type mergeScratch struct {
	syms       [mergeStack]uint32
	next, prev [mergeStack]int32
	where      [mergeStack]int32
	keys       [mergeStack]uint64
}

var mergeScratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// mergeTable is an open-addressing hash table from a token pair to its merge
// rank, in 8-byte slots (left 20 bits | right 20 bits | rank 24 bits), so the
// table for 150k merges is 4 MB and stays in cache far better than a Go map.
// The merged token comes from a rank-indexed array, read once per merge.
// BPE on a long piece (a run of CJK characters) makes a few lookups per
// byte, so this is its inner loop; most of those lookups find nothing
// (three in four over Chinese text: neighbouring characters that form no
// token), and a bit filter of 8+ bits per merge, small enough for L2,
// answers nearly all of them without touching the table.
type mergeTable struct {
	slots  []uint64
	merged []uint32 // by rank
	shift  uint
	filter []uint64 // bit set: a pair whose bit is clear has no merge
	fshift uint
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
	bits, fshift := 1<<12, uint(64-12)
	for bits < 8*n {
		bits, fshift = bits*2, fshift-1
	}
	t := mergeTable{slots: make([]uint64, size), merged: make([]uint32, n), shift: shift,
		filter: make([]uint64, bits/64), fshift: fshift}
	for i := range t.slots {
		t.slots[i] = emptySlot
	}
	return t
}

func (t *mergeTable) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// bit is key's position in the filter, from a hash independent of home's.
func (t *mergeTable) bit(key uint64) uint64 { return (key * 0xC2B2AE3D27D4EB4F) >> t.fshift }

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
			f := t.bit(key)
			t.filter[f/64] |= 1 << (f % 64)
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
	if f := t.bit(key); t.filter[f/64]&(1<<(f%64)) == 0 {
		return 0, false
	}
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
// entry, so the cache is bounded whatever the input. An entry holds its
// piece and ids inline: one allocation with no pointers, so a lookup reads
// the slot and one or two cache lines of the entry (not a string and a
// slice elsewhere), and the GC never scans the entries of a full cache.
type pieceCache struct {
	slots [pieceCacheSlots]atomic.Pointer[pieceEntry]
}

type pieceEntry struct {
	n, k  uint8 // the piece's length and its ids'
	piece [pieceCacheMax]byte
	ids   [pieceCacheIDs]uint32
}

const (
	pieceCacheSlots = 1 << 16
	// pieceCacheMax is the longest piece cached: longer ones (runs of CJK
	// characters, long identifiers) rarely repeat.
	pieceCacheMax = 48
	// pieceCacheIDs is the most ids a cached piece has: a short piece of
	// more is rare bytes, cheap to merge again.
	pieceCacheIDs = 16
)

func (c *pieceCache) ways(s string) (a, b *atomic.Pointer[pieceEntry]) {
	h := xxh3.HashString(s)
	return &c.slots[h&(pieceCacheSlots-1)], &c.slots[(h>>32)&(pieceCacheSlots-1)]
}

func (c *pieceCache) get(s string) ([]uint32, bool) {
	a, b := c.ways(s)
	if e := a.Load(); e != nil && e.holds(s) {
		return e.ids[:e.k], true
	}
	if e := b.Load(); e != nil && e.holds(s) {
		return e.ids[:e.k], true
	}
	return nil, false
}

// holds reports whether e is the entry of piece s.
func (e *pieceEntry) holds(s string) bool {
	return int(e.n) == len(s) && string(e.piece[:e.n]) == s
}

func (c *pieceCache) put(s string, ids []uint32) {
	if len(s) > pieceCacheMax || len(ids) > pieceCacheIDs {
		return
	}
	// A copy: s may point into a large request.
	e := &pieceEntry{n: uint8(len(s)), k: uint8(len(ids))}
	copy(e.piece[:], s)
	copy(e.ids[:], ids)
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
