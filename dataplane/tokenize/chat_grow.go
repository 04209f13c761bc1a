package tokenize

import (
	"slices"
	"sync/atomic"
)

// Prefixes that grow in place.
//
// Turn N+1's messages and ids start with turn N's, which the prefix cache
// holds; copying them whole on every turn would cost more than the new
// part. So a remembered prefix's bytes (and its ids) live in an array with
// room past their end, and the first turn that continues the prefix
// writes its own new part there; the prefix and every other holder read
// only up to their own length, which nobody writes again. A later turn
// that continues the same prefix with the same bytes (the same request
// again) shares what the first wrote; one with other bytes (a regenerated
// reply) copies.

// growth is who may extend an array in place past a prefix's end: claimed
// by the first continuation, which publishes in to how far it wrote. A
// prefix that shares another's written part does not own the room past
// it (the other's continuation may write there): its growth starts
// claimed, so what continues it copies.
type growth struct {
	claimed atomic.Bool
	to      atomic.Int64
}

// grow returns want, whose first len(have) elements are have's, sharing
// have's array when g allows it and there is room, else in a new array
// with room for a few turns more; owns says whether the room past the
// result is its own to grow into.
func grow[T comparable](g *growth, have, want []T) (out []T, owns bool) {
	n := len(want)
	if g != nil && n <= cap(have) {
		if g.claimed.CompareAndSwap(false, true) {
			out := append(have, want[len(have):]...) // in place: n fits
			g.to.Store(int64(n))
			return out, true
		}
		if int(g.to.Load()) >= n && slices.Equal(have[len(have):n], want[len(have):]) {
			return have[:n], false
		}
	}
	out = make([]T, n, n+n/4+64)
	copy(out, want)
	return out, true
}
