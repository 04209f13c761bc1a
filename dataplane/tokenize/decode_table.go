package tokenize

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// byteTable is a byte-level vocabulary's decoding laid flat, one uint64 an
// id, so that detokenizing a token is one load and, for most tokens, no
// second one: a streamed token's cost is then a cache miss on one entry
// instead of the added-token map, a slice header and the spelling it
// points at.
//
//	entry, inline (the token's bytes fit in 7):
//	| bytes 1-7: the token's bytes, low to high | byte 0: special<<7 | whole<<5 | length (0-7) |
//	entry, long (bit 6 of byte 0 set):
//	| bits 40-63: length | bits 8-39: offset into long | byte 0: special<<7 | 1<<6 | whole<<5 |
//
// whole marks a token whose bytes are valid UTF-8 by themselves: text made
// only of such tokens needs no check for split or invalid sequences.
//
// An id's bytes are what Decode gives it: an added token's content (none
// when special ones are skipped and it is special), otherwise its
// vocabulary spelling's raw bytes; ids outside the table have none.
type byteTable struct {
	entries []uint64
	long    []byte
}

const (
	entrySpecial = 1 << 7
	entryLong    = 1 << 6
	entryWhole   = 1 << 5
	entryLenMask = 7
)

// bytes returns t's byte table, built on first use.
func (t *Tokenizer) bytes() *byteTable {
	t.tableOnce.Do(func() { t.table = t.buildByteTable() })
	return &t.table
}

// buildByteTable lays out every id's bytes (tokenOf) as entries.
func (t *Tokenizer) buildByteTable() byteTable {
	var tab byteTable
	tab.entries = make([]uint64, len(t.spelling))
	for id := range tab.entries {
		b, special := t.tokenOf(uint32(id))
		var e uint64
		if special {
			e = entrySpecial
		}
		if utf8.Valid(b) {
			e |= entryWhole
		}
		if len(b) <= 7 {
			var word [8]byte
			copy(word[1:], b)
			e |= binary.LittleEndian.Uint64(word[:]) | uint64(len(b))
		} else {
			e |= entryLong | uint64(len(tab.long))<<8 | uint64(len(b))<<40
			tab.long = append(tab.long, b...)
		}
		tab.entries[id] = e
	}
	return tab
}

// tokenOf is the bytes of one id, as Decode gives them with special
// tokens kept, and whether it is a special added token.
func (t *Tokenizer) tokenOf(id uint32) (b []byte, special bool) {
	if a, ok := t.added[id]; ok {
		return []byte(a.Content), a.Special
	}
	if int(id) < len(t.spelling) {
		return t.spelling[id], false
	}
	return nil, false
}

// appendIDs appends the bytes of ids, and reports whether each token it
// appended is whole (valid UTF-8 by itself).
func (tab *byteTable) appendIDs(dst []byte, ids []uint32, skipSpecial bool) ([]byte, bool) {
	whole := uint64(entryWhole)
	for _, id := range ids {
		if int(id) >= len(tab.entries) {
			continue
		}
		e := tab.entries[id]
		if skipSpecial && e&entrySpecial != 0 {
			continue
		}
		whole &= e
		if e&entryLong == 0 {
			// One 8-byte store into dst's room, then dst cut to the
			// token's length: no copy call a token. The bytes past it
			// are room append would overwrite as well.
			n := len(dst)
			if cap(dst)-n < 8 {
				dst = slices.Grow(dst, 8)
			}
			binary.LittleEndian.PutUint64(dst[n:n+8], e>>8)
			dst = dst[:n+int(e&entryLenMask)]
			continue
		}
		off, n := uint32(e>>8), int(e>>40)
		dst = append(dst, tab.long[off:int(off)+n]...)
	}
	return dst, whole != 0
}
