package tokenize

import (
	"fmt"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
)

// bpe is a byte-level BPE model: merges apply to token ids, lowest rank
// first and leftmost first among equals, as Hugging Face tokenizers do.
// Results per pre-token are cached.
type bpe struct {
	vocab        map[string]uint32
	byteID       [256]uint32       // id of each single byte's spelling
	merges       map[uint64]uint64 // (left<<32 | right) -> (rank<<32 | merged id)
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
	b.merges = make(map[uint64]uint64, len(pairs))
	for rank, p := range pairs {
		l, okL := m.Vocab[p[0]]
		r, okR := m.Vocab[p[1]]
		merged, okM := m.Vocab[p[0]+p[1]]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("%w: merge %d (%q %q) names tokens outside the vocabulary", ErrInvalid, rank, p[0], p[1])
		}
		key := uint64(l)<<32 | uint64(r)
		if _, dup := b.merges[key]; !dup { // the first (lowest) rank wins
			b.merges[key] = uint64(rank)<<32 | uint64(merged)
		}
	}
	return b, nil
}

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

// merge runs BPE on piece from single bytes.
func (b *bpe) merge(dst []uint32, piece string) []uint32 {
	if b.ignoreMerges {
		if id, ok := b.vocab[byteLevelString([]byte(piece))]; ok {
			return append(dst, id)
		}
	}
	var stack [64]uint32
	syms := stack[:0]
	if len(piece) > len(stack) {
		syms = make([]uint32, 0, len(piece))
	}
	for i := 0; i < len(piece); i++ {
		syms = append(syms, b.byteID[piece[i]])
	}
	for len(syms) > 1 {
		best, bestRank := -1, uint64(1<<32)
		var bestID uint32
		for i := 0; i+1 < len(syms); i++ {
			if m, ok := b.merges[uint64(syms[i])<<32|uint64(syms[i+1])]; ok && m>>32 < bestRank {
				best, bestRank, bestID = i, m>>32, uint32(m)
			}
		}
		if best < 0 {
			break
		}
		// Merge every non-overlapping occurrence of the pair, left to right:
		// the same result as merging them one at a time by position.
		l, r := syms[best], syms[best+1]
		out := syms[:best]
		for i := best; i < len(syms); i++ {
			if i+1 < len(syms) && syms[i] == l && syms[i+1] == r {
				out = append(out, bestID)
				i++
			} else {
				out = append(out, syms[i])
			}
		}
		syms = out
	}
	return append(dst, syms...)
}

// pieceCache maps pre-tokens to their ids. It is sharded to keep locks
// short under concurrency and bounded: a full shard is emptied, so hostile
// input cannot grow it without limit.
type pieceCache struct {
	shards [64]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]uint32
}

const pieceCacheShardMax = 8192

func (c *pieceCache) shard(s string) *cacheShard {
	return &c.shards[xxh3.HashString(s)&63]
}

func (c *pieceCache) get(s string) ([]uint32, bool) {
	sh := c.shard(s)
	sh.mu.RLock()
	ids, ok := sh.m[s]
	sh.mu.RUnlock()
	return ids, ok
}

func (c *pieceCache) put(s string, ids []uint32) {
	if len(s) > 256 {
		return // long pieces are rare and would crowd out the useful ones
	}
	sh := c.shard(s)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= pieceCacheShardMax {
		sh.m = make(map[string][]uint32, 1024)
	}
	sh.m[strings.Clone(s)] = append([]uint32(nil), ids...) // a clone: s may point into a large request
	sh.mu.Unlock()
}
