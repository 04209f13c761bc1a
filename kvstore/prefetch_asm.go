//go:build amd64 || arm64

package kvstore

// prefetch asks the CPU to bring each entry's cache line into its caches
// and returns 0. Unlike a load, a prefetch instruction retires at once, so
// the work after it goes on while the lines arrive.
//
//go:noescape
func prefetch(ps []*entry) uint64
