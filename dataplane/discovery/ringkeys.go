package discovery

import (
	"context"
	"slices"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// KeySink takes the engine keys by pool position: syncring.Ring.SetEngines.
type KeySink interface{ SetEngines(keys []string) }

// RingKeys returns each engine's ring key at its pool position (Pos): the
// id it gave in its handshake, so that replicas reaching an engine by
// different addresses agree on it; "" for a free position, an engine that
// has not yet completed a handshake, and a drained one (no replica routes
// to it). A leaving engine keeps its key while its streams finish.
func RingKeys(es []*engine.Engine) []string {
	n := 0
	for _, e := range es {
		n = max(n, e.Pos()+1)
	}
	keys := make([]string, n)
	for _, e := range es {
		if e.State() != engine.StateDrained {
			keys[e.Pos()] = e.Info().ID
		}
	}
	return keys
}

// FollowPool hands ring the pool's keys now and after every change of the
// pool's membership or of an engine's identity, until ctx ends.
func FollowPool(ctx context.Context, pool *engine.Pool, ring KeySink) {
	var last []string
	for {
		changed := pool.Changed() // before reading: a change after it wakes us
		if keys := RingKeys(pool.Engines()); last == nil || !slices.Equal(keys, last) {
			ring.SetEngines(keys)
			last = keys
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
