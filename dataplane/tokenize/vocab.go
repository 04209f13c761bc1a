package tokenize

import (
	"iter"
	"math/bits"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// vocabTable maps a token's spelling to its id, as the vocabulary's
// map[string]uint32 did, with no pointers in it: the spellings lie back
// to back in one byte array and an open-addressed table of offsets
// finds them. A map of 150 k strings is 150 k objects that every GC
// cycle marks again, for each model behind the router; this is two
// arrays the collector does not scan (perf/RESULTS.md, Session 21).
type vocabTable struct {
	text  []byte
	slots []vocabSlot // a power of two long, at most half full
	n     int
}

// vocabSlot is one spelling: text[off:off+size] is token id. tag is
// the spelling's hash with its low bit set, so 0 marks an empty slot.
type vocabSlot struct {
	off, size, id, tag uint32
}

// newVocabTable copies vocab into a table.
func newVocabTable(vocab map[string]uint32) *vocabTable {
	t := &vocabTable{n: len(vocab)}
	size := 0
	for s := range vocab {
		size += len(s)
	}
	t.text = make([]byte, 0, size)
	t.slots = make([]vocabSlot, 1<<bits.Len(uint(2*len(vocab)|1)))
	mask := uint32(len(t.slots) - 1)
	for s, id := range vocab {
		h := xxh3.HashString(s)
		tag := uint32(h>>32) | 1
		for i := uint32(h) & mask; ; i = (i + 1) & mask {
			if t.slots[i].tag == 0 {
				t.slots[i] = vocabSlot{off: uint32(len(t.text)), size: uint32(len(s)), id: id, tag: tag}
				break
			}
		}
		t.text = append(t.text, s...)
	}
	return t
}

// get returns the id of spelling s.
func (t *vocabTable) get(s string) (uint32, bool) {
	h := xxh3.HashString(s)
	tag := uint32(h>>32) | 1
	mask := uint32(len(t.slots) - 1)
	for i := uint32(h) & mask; ; i = (i + 1) & mask {
		sl := &t.slots[i]
		if sl.tag == 0 {
			return 0, false
		}
		if sl.tag == tag && int(sl.size) == len(s) && string(t.text[sl.off:sl.off+sl.size]) == s {
			return sl.id, true
		}
	}
}

// getBytes returns the id of spelling b; get does not keep its argument.
func (t *vocabTable) getBytes(b []byte) (uint32, bool) {
	return t.get(unsafe.String(unsafe.SliceData(b), len(b)))
}

// Len returns the number of spellings.
func (t *vocabTable) Len() int { return t.n }

// all yields every spelling (a view of the table's text) and its id, in
// no set order.
func (t *vocabTable) all() iter.Seq2[string, uint32] {
	return func(yield func(string, uint32) bool) {
		for i := range t.slots {
			sl := &t.slots[i]
			if sl.tag != 0 && !yield(unsafe.String(unsafe.SliceData(t.text[sl.off:]), int(sl.size)), sl.id) {
				return
			}
		}
	}
}
