package kvstore

import (
	"context"
	"time"
)

// Maintenance cadence of Maintain: expiring approximate entries and
// sweeping stale ones a few shards at a time keeps each pass short (the
// writers of a shard wait for it) while a whole index is swept in seconds.
const (
	maintainEvery  = 100 * time.Millisecond
	shardsPerSweep = 8
)

// Maintain runs the index's periodic work until ctx ends: it expires
// approximate entries past their lifetime and sweeps stale entries from a
// few shards at a time. A router runs it in one goroutine for its index.
func (ix *Index) Maintain(ctx context.Context) {
	t := time.NewTicker(maintainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ix.ExpireApprox()
			ix.Sweep(shardsPerSweep)
		}
	}
}
