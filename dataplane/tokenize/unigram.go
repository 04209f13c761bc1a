package tokenize

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// unigram is SentencePiece's Unigram model as Hugging Face tokenizers runs
// it (src/models/unigram/model.rs, 3ba8ad0: encode_optimized, after
// SentencePiece's unigram_model.cc): Viterbi over the byte positions of a
// piece, where each vocabulary piece that starts at a character boundary
// is an edge scored by its log probability, and a character no piece
// covers alone is an unknown of score (lowest score - 10). Among equal
// scores the first candidate found stays: shorter pieces before longer
// ones, pieces before the unknown. On the best path, consecutive unknowns
// are fused into one, which becomes its bytes' <0xNN> tokens with
// byte_fallback (when all exist), else the unknown token.
type unigram struct {
	vocab        *vocabTable
	scores       []float64 // by id
	trie         pieceTrie
	unk          uint32
	unkScore     float64
	byteFallback bool
	byteIDs      [256]uint32
	byteOK       [256]bool
	cache        pieceCache
}

func newUnigram(m *modelJSON) (*unigram, error) {
	var vocab [][2]json.RawMessage
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
		return nil, fmt.Errorf("%w: Unigram vocab is not a list of [piece, score]: %v", ErrInvalid, err)
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("%w: Unigram model without a vocabulary", ErrInvalid)
	}
	if m.UnkID == nil {
		return nil, unsupported("Unigram model without unk_id (tokenizers fails on any character outside the vocabulary)")
	}
	if *m.UnkID < 0 || *m.UnkID >= len(vocab) || len(vocab) > maxMergeID {
		return nil, fmt.Errorf("%w: Unigram unk_id %d of %d pieces", ErrInvalid, *m.UnkID, len(vocab))
	}
	ids := make(map[string]uint32, len(vocab))
	u := &unigram{scores: make([]float64, len(vocab)),
		unk: uint32(*m.UnkID), byteFallback: m.ByteFallback}
	minScore := 0.0
	for id, entry := range vocab {
		var piece string
		var score float64
		if json.Unmarshal(entry[0], &piece) != nil || json.Unmarshal(entry[1], &score) != nil {
			return nil, fmt.Errorf("%w: Unigram piece %d is not [string, number]", ErrInvalid, id)
		}
		ids[piece] = uint32(id) // a repeated piece: the last id, as tokenizers' map keeps
		u.scores[id] = score
		u.trie.add(piece, uint32(id))
		if id == 0 || score < minScore {
			minScore = score
		}
	}
	u.trie.finish()
	u.vocab = newVocabTable(ids)
	u.unkScore = minScore - 10
	for b := range 256 {
		u.byteIDs[b], u.byteOK[b] = u.vocab.get(fmt.Sprintf("<0x%02X>", b))
	}
	return u, nil
}

// encodePiece appends the ids of one pre-token.
func (u *unigram) encodePiece(dst []uint32, piece string) []uint32 {
	if ids, ok := u.cache.get(piece); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = u.viterbi(dst, piece)
	u.cache.put(piece, dst[start:])
	return dst
}

// bestPath is Viterbi's state at a byte position: the best path's score
// ending there, the piece's start and id (noID: not reached).
type bestPath struct {
	score float64
	from  int32
	id    uint32
}

type unigramScratch struct {
	best []bestPath
	ends []int32
}

var unigramPool = sync.Pool{New: func() any { return new(unigramScratch) }}

func (u *unigram) viterbi(dst []uint32, s string) []uint32 {
	if s == "" {
		return dst
	}
	sc := unigramPool.Get().(*unigramScratch)
	defer unigramPool.Put(sc)
	if cap(sc.best) < len(s)+1 {
		sc.best = make([]bestPath, len(s)+1)
	}
	best := sc.best[:len(s)+1]
	for i := range best {
		best[i] = bestPath{id: noID}
	}
	for at := 0; at < len(s); {
		_, mblen := utf8.DecodeRuneInString(s[at:])
		here := best[at].score
		single := false
		for node, i := int32(0), at; i < len(s); i++ {
			if node = u.trie.child(node, s[i]); node < 0 {
				break
			}
			id := u.trie.nodes[node].id
			if id == noID {
				continue
			}
			end := i + 1
			if cand := here + u.scores[id]; best[end].id == noID || cand > best[end].score {
				best[end] = bestPath{score: cand, from: int32(at), id: id}
			}
			if end-at == mblen {
				single = true
			}
		}
		if !single {
			end := at + mblen
			if cand := here + u.unkScore; best[end].id == noID || cand > best[end].score {
				best[end] = bestPath{score: cand, from: int32(at), id: u.unk}
			}
		}
		at += mblen
	}
	// Walk back, then emit in order, fusing runs of unknowns.
	ends := sc.ends[:0]
	for end := len(s); end > 0; end = int(best[end].from) {
		ends = append(ends, int32(end))
	}
	sc.ends = ends
	for k := len(ends) - 1; k >= 0; k-- {
		end := int(ends[k])
		from := int(best[end].from)
		if best[end].id != u.unk {
			dst = append(dst, best[end].id)
			continue
		}
		for k > 0 && best[ends[k-1]].id == u.unk {
			k--
			end = int(ends[k])
		}
		dst = u.appendUnknown(dst, s[from:end])
	}
	return dst
}

// appendUnknown appends the tokens of a fused run of unknown characters,
// as Unigram::tokenize does: a piece of the vocabulary if the run is one,
// else its byte tokens with byte_fallback, else the unknown token.
func (u *unigram) appendUnknown(dst []uint32, run string) []uint32 {
	if id, ok := u.vocab.get(run); ok {
		return append(dst, id)
	}
	if u.byteFallback {
		all := true
		for i := 0; i < len(run); i++ {
			all = all && u.byteOK[run[i]]
		}
		if all {
			for i := 0; i < len(run); i++ {
				dst = append(dst, u.byteIDs[run[i]])
			}
			return dst
		}
	}
	return append(dst, u.unk)
}

// pieceTrie holds a vocabulary by bytes, for Viterbi's common-prefix
// search: node 0 is the root, id is noID where no piece ends. A piece
// added twice keeps its last id, as tokenizers' token_to_ids does. The
// root's children are a table by byte (it has a child for most first
// bytes); other nodes keep their few edges sorted by byte once built.
type pieceTrie struct {
	nodes []pieceNode
	root  [256]int32
}

type pieceNode struct {
	edges []trieEdge
	id    uint32
}

func (t *pieceTrie) add(piece string, id uint32) {
	if len(t.nodes) == 0 {
		t.nodes = []pieceNode{{id: noID}}
		for i := range t.root {
			t.root[i] = -1
		}
	}
	if piece == "" {
		return
	}
	n := t.root[piece[0]]
	if n < 0 {
		n = t.newNode()
		t.root[piece[0]] = n
	}
	for i := 1; i < len(piece); i++ {
		c := int32(-1) // edges are not sorted yet: a linear search
		for _, e := range t.nodes[n].edges {
			if e.b == piece[i] {
				c = e.child
				break
			}
		}
		if c < 0 {
			c = t.newNode()
			t.nodes[n].edges = append(t.nodes[n].edges, trieEdge{piece[i], c})
		}
		n = c
	}
	t.nodes[n].id = id
}

func (t *pieceTrie) newNode() int32 {
	t.nodes = append(t.nodes, pieceNode{id: noID})
	return int32(len(t.nodes) - 1)
}

// finish sorts every node's edges, for child's binary search.
func (t *pieceTrie) finish() {
	for i := range t.nodes {
		slices.SortFunc(t.nodes[i].edges, func(a, b trieEdge) int { return int(a.b) - int(b.b) })
	}
}

// child returns n's child by b, or -1; n 0 is the root.
func (t *pieceTrie) child(n int32, b byte) int32 {
	if n == 0 {
		return t.root[b]
	}
	edges := t.nodes[n].edges
	if len(edges) <= 8 {
		for _, e := range edges {
			if e.b == b {
				return e.child
			}
		}
		return -1
	}
	lo, hi := 0, len(edges)
	for lo < hi {
		m := (lo + hi) / 2
		if edges[m].b < b {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(edges) && edges[lo].b == b {
		return edges[lo].child
	}
	return -1
}
