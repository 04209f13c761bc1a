package tokenize

import (
	"slices"
	"sync/atomic"
	"unsafe"
)

// Prefixes that grow in place.
//
// Turn N+1's messages, rendering and ids start with turn N's, which the
// prefix cache holds; copying them whole on every turn would cost more
// than the new part. So a remembered prefix's bytes (and its text and ids)
// live in an array with room past their end, and the first turn that
// continues the prefix writes its own new part there; the prefix and
// every other holder read only up to their own length, and nothing is
// written twice. A later turn that continues the same prefix with the
// same elements (the same request again) shares what the first wrote; one
// with others (a regenerated reply) copies. A rendering's text is
// followed in its array by the generation prompt that the turn's prompt
// string ends with; those bytes are written already (frozen), and a
// continuation grows in place only if its new text starts with them, as
// an assistant reply's rendering starts with the generation prompt.

// growth is who may extend an array in place past a prefix's end: claimed
// by the first continuation, which publishes in to how far the array is
// written (at least frozen, where bytes past the prefix were written with
// it). A prefix that shares another's written part does not own the room
// past it (the other's continuation may write there): its growth starts
// claimed, so what continues it copies.
type growth struct {
	claimed atomic.Bool
	to      atomic.Int64
}

// init sets up the growth of a new prefix whose array holds written
// elements up to frozen; owns says whether the room past them is its own.
func (g *growth) init(owns bool, frozen int) {
	g.claimed.Store(!owns)
	g.to.Store(int64(frozen))
}

// grow returns have followed by add, sharing have's array when g allows
// it and there is room, else in a new array with room for a few turns
// more; owns says whether the room past the result is its own to grow
// into.
func grow[T comparable](g *growth, have, add []T) (out []T, owns bool) {
	n := len(have) + len(add)
	if g != nil && n <= cap(have) {
		room := have[len(have):n]
		if g.claimed.CompareAndSwap(false, true) {
			written := max(int(g.to.Load())-len(have), 0)
			if k := min(written, len(add)); slices.Equal(room[:k], add[:k]) {
				if len(add) > written {
					copy(room[written:], add[written:])
					g.to.Store(int64(n))
				}
				return have[:n], len(add) >= written
			}
		} else if int(g.to.Load()) >= n && slices.Equal(room, add) {
			return have[:n], false
		}
	}
	out = make([]T, n, n+n/4+64)
	copy(out[copy(out, have):], add)
	return out, true
}

// bytesOf is the bytes of s, to be read, never written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf is b as a string; b is never written again.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
