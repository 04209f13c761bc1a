package tokenize

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// charSymbols turns a SentencePiece-style piece into BPE's first symbols,
// as Hugging Face's BPE::merge_word does (tokenizers
// src/models/bpe/model.rs, 3ba8ad0): each character that is a token is
// one symbol; one that is not becomes its bytes' <0xNN> tokens with
// byte_fallback (when the vocabulary has all of them), else the unknown
// token, consecutive unknowns fused into one with fuse_unk. Without an
// unknown token such a character is dropped.
type charSymbols struct {
	bmp          []uint32 // id of each BMP character as a token; noID if none
	vocab        *vocabTable
	byteFallback bool
	byteIDs      [256]uint32
	byteOK       [256]bool
	unk          uint32
	hasUnk       bool
	fuseUnk      bool
	// cutWords: a piece may be cut before each U+2581 whose previous
	// character is not U+2581 and not in joins (see words).
	cutWords bool
	joins    map[rune]bool
}

// wordMark is SentencePiece's space, U+2581.
const wordMark = "\u2581"

// noID marks a character that is not a token by itself.
const noID = ^uint32(0)

func newCharSymbols(vocab *vocabTable, m *modelJSON) (*charSymbols, error) {
	c := &charSymbols{bmp: make([]uint32, 0x10000), vocab: vocab, byteFallback: m.ByteFallback, fuseUnk: m.FuseUnk}
	for i := range c.bmp {
		c.bmp[i] = noID
	}
	for s, id := range vocab.all() {
		if r, n := utf8.DecodeRuneInString(s); n == len(s) && r < 0x10000 && (r != utf8.RuneError || n > 1) {
			c.bmp[r] = id
		}
	}
	for b := range 256 {
		c.byteIDs[b], c.byteOK[b] = vocab.get(fmt.Sprintf("<0x%02X>", b))
	}
	c.setWordCuts(vocab, m.IgnoreMerges)
	if m.UnkToken != nil {
		id, ok := vocab.get(*m.UnkToken)
		if !ok {
			return nil, fmt.Errorf("%w: unk_token %q is not in the vocabulary", ErrInvalid, *m.UnkToken)
		}
		c.unk, c.hasUnk = id, true
	}
	return c, nil
}

// setWordCuts finds where pieces may be cut. BPE only ever joins
// neighbouring symbols into a token of the vocabulary, so a place in a
// piece between characters x and y that no token spells as "xy" is never
// crossed: BPE on each side alone gives the same tokens as on the whole
// (merges on either side never meet, and each side's merges happen in the
// same order). Without a pre-tokenizer that splits words (Llama 2, Gemma)
// a whole segment is one piece, so cutting it before each U+2581 that
// follows another character turns one long BPE into many short ones the
// piece cache answers. joins holds the characters x that some token spells
// before U+2581 (Gemma 3 has ">▁</"); ignore_merges turns this off, as it
// looks the whole piece up first.
func (c *charSymbols) setWordCuts(vocab *vocabTable, ignoreMerges bool) {
	if _, ok := vocab.get(wordMark); !ok || ignoreMerges {
		return
	}
	c.cutWords, c.joins = true, map[rune]bool{}
	for s := range vocab.all() {
		for i := strings.Index(s, wordMark); i > 0; {
			if r, _ := utf8.DecodeLastRuneInString(s[:i]); string(r) != wordMark {
				c.joins[r] = true
			}
			k := strings.Index(s[i+len(wordMark):], wordMark)
			if k < 0 {
				break
			}
			i += len(wordMark) + k
		}
	}
}

// nextWord returns the end of the word of piece that starts at i: the next
// place where it may be cut, or the end.
func (c *charSymbols) nextWord(piece string, i int) int {
	for j := i + 1; j < len(piece); {
		k := strings.Index(piece[j:], wordMark)
		if k < 0 {
			return len(piece)
		}
		j += k
		r, _ := utf8.DecodeLastRuneInString(piece[:j])
		if string(r) != wordMark && !c.joins[r] {
			return j
		}
		j += len(wordMark)
	}
	return len(piece)
}

// appendSymbols appends the first symbols of piece to syms.
func (c *charSymbols) appendSymbols(syms []uint32, piece string) []uint32 {
	pendingUnk := false // an unknown token waits: it is added before the next known character
	for i := 0; i < len(piece); {
		r, n := utf8.DecodeRuneInString(piece[i:])
		id := noID
		if r < 0x10000 && (r != utf8.RuneError || n > 1) {
			id = c.bmp[r]
		} else if v, ok := c.vocab.get(piece[i : i+n]); ok {
			id = v
		}
		ch := piece[i : i+n]
		i += n
		if id != noID {
			if pendingUnk {
				syms = append(syms, c.unk)
				pendingUnk = false
			}
			syms = append(syms, id)
			continue
		}
		if c.byteFallback && c.bytesKnown(ch) {
			// As merge_word: byte tokens go in before a waiting unknown.
			for k := 0; k < len(ch); k++ {
				syms = append(syms, c.byteIDs[ch[k]])
			}
			continue
		}
		if !c.hasUnk {
			continue
		}
		if pendingUnk && !c.fuseUnk {
			syms = append(syms, c.unk)
		}
		pendingUnk = true
	}
	if pendingUnk {
		syms = append(syms, c.unk)
	}
	return syms
}

func (c *charSymbols) bytesKnown(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if !c.byteOK[ch[k]] {
			return false
		}
	}
	return true
}

// mergeChars runs BPE on a SentencePiece-style piece: its characters (or
// their byte tokens) are the first symbols, then merges as merge does.
func (b *bpe) mergeChars(dst []uint32, piece string) []uint32 {
	if b.ignoreMerges {
		if id, ok := b.vocab.get(piece); ok {
			return append(dst, id)
		}
	}
	sc := charScratchPool.Get().(*charScratch)
	defer sc.release()
	syms := b.chars.appendSymbols(sc.syms[:0], piece)
	n := len(syms)
	if n == 0 {
		return dst
	}
	sc.grow(n)
	sc.syms = syms
	next, prev := sc.next[:n], sc.prev[:n]
	q := pairQueue{keys: sc.keys[:0], where: sc.where[:n]}
	for i := range n {
		next[i], prev[i], q.where[i] = int32(i+1), int32(i-1), -1
	}
	next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		if rank, ok := b.merges.rank(syms[i], syms[i+1]); ok {
			q.where[i] = int32(len(q.keys))
			q.keys = append(q.keys, pairKey(rank, int32(i)))
		}
	}
	q.init()
	dst = b.mergeQueued(dst, syms, next, prev, &q)
	sc.keys = q.keys
	return dst
}

// charScratch is mergeChars' working memory, pooled and grown as needed:
// without a pre-tokenizer that splits words (Llama 2, Gemma) a whole text
// segment is one piece, so pieces can be long.
type charScratch struct {
	syms       []uint32
	next, prev []int32
	where      []int32
	keys       []uint64
}

// charScratchKeep is the largest scratch (in symbols) returned to the pool.
const charScratchKeep = 1 << 18

var charScratchPool = sync.Pool{New: func() any { return new(charScratch) }}

func (sc *charScratch) grow(n int) {
	if cap(sc.next) < n {
		sc.next, sc.prev, sc.where = make([]int32, n), make([]int32, n), make([]int32, n)
		sc.keys = make([]uint64, 0, n)
	}
}

func (sc *charScratch) release() {
	if cap(sc.syms) <= charScratchKeep && cap(sc.next) <= charScratchKeep {
		charScratchPool.Put(sc)
	}
}
