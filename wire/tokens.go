package wire

import (
	"encoding/binary"
	"slices"
	"unsafe"
)

// Tokens is a read-only view of packed little-endian uint32 token ids. A
// decoded message's Tokens point into the frame's payload: no copy is made,
// and the view is valid as long as the payload is.
type Tokens struct{ b []byte }

// TokensFromBytes views b (little-endian uint32s; len(b) must be a multiple of 4).
func TokensFromBytes(b []byte) Tokens { return Tokens{b: b[:len(b)&^3]} }

// TokensOf views ids as Tokens. On little-endian machines this shares ids'
// memory (no copy); elsewhere it packs a copy.
func TokensOf(ids []uint32) Tokens {
	if len(ids) == 0 {
		return Tokens{}
	}
	if nativeLittleEndian {
		return Tokens{b: unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))}
	}
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return Tokens{b: b}
}

// Len returns the number of token ids.
func (t Tokens) Len() int { return len(t.b) / 4 }

// At returns the i-th token id.
func (t Tokens) At(i int) uint32 { return binary.LittleEndian.Uint32(t.b[4*i:]) }

// Bytes returns the packed little-endian bytes of the view.
func (t Tokens) Bytes() []byte { return t.b }

// Slice returns the view of ids [i, j).
func (t Tokens) Slice(i, j int) Tokens { return Tokens{b: t.b[4*i : 4*j]} }

// AppendTo appends the ids to dst; on little-endian machines it is one memmove.
func (t Tokens) AppendTo(dst []uint32) []uint32 { return appendWords(dst, t.b) }

// appendWords appends the packed little-endian words of b to dst: one
// memmove on little-endian machines, a word at a time elsewhere.
func appendWords[T uint32 | uint64](dst []T, b []byte) []T {
	size := int(unsafe.Sizeof(T(0)))
	n := len(b) / size
	if n == 0 {
		return dst
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	if nativeLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[start])), size*n), b)
		return dst
	}
	for i := range n {
		w := b[size*i:]
		if size == 4 {
			dst[start+i] = T(binary.LittleEndian.Uint32(w))
		} else {
			dst[start+i] = T(binary.LittleEndian.Uint64(w))
		}
	}
	return dst
}

// Equal reports whether both views hold the same ids.
func (t Tokens) Equal(u Tokens) bool { return string(t.b) == string(u.b) }

var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
