package syncring

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestFiveReplicasConverge: after quiescence every replica's global view is
// the sum of all contributions; a replica killed mid-run leaves the view
// when the ring re-forms; it rejoins when it comes back.
func TestFiveReplicasConverge(t *testing.T) {
	rs := fleet(t, 5, nil)
	converged(t, rs, "5 replicas agree on the sum")
	for _, r := range rs {
		checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
			if r.ring.Stats().RoundsDone == 0 {
				return fmt.Errorf("%s reports no round done", r.id)
			}
			return nil
		})
	}

	// Loads change: the view follows.
	rs[3].src.set(loadsFor(9))
	converged(t, rs, "after a load change")

	// Kill one mid-run.
	before := rs[0].ring.Stats().Epoch
	rs[2].stop()
	converged(t, rs, "4 replicas after r02 left")
	if rs[0].ring.Stats().Epoch == before {
		t.Fatal("membership changed without a new epoch")
	}

	// Bring it back on the same address: it rejoins.
	rs[2].start(t, addrsOf(rs), nil, nil)
	converged(t, rs, "5 replicas after r02 came back")
}

func addrsOf(rs []*replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.addr)
	}
	return out
}

// TestTwoReplicas covers the smallest ring (one step per phase).
func TestTwoReplicas(t *testing.T) {
	rs := fleet(t, 2, nil)
	converged(t, rs, "2 replicas")
	rs[1].stop()
	converged(t, rs, "alone")
	if got := rs[0].ring.PeerLoad()[3]; got != (Load{}) {
		t.Fatalf("alone, peers still load engine 3: %+v", got)
	}
}

// TestReservationBroadcast: with rounds too rare to matter, a reservation
// reaches the peer at once; once a round lands it is reconciled: counted
// once, in the round's sum, not on top of it.
func TestReservationBroadcast(t *testing.T) {
	rs := fleet(t, 2, func(c *Config) { c.Interval = 1 << 40 }) // no rounds
	a, b := rs[0], rs[1]
	formed(t, rs)
	a.src.reserve(4, 500)
	a.src.reserve(4, 20)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if got, want := b.ring.PeerLoad()[4], (Load{PrefillTokens: 520, Requests: 2}); got != want {
			return fmt.Errorf("the peer sees %+v on engine 4, want the reservations' %+v", got, want)
		}
		return nil
	})
	a.src.release(4, 500)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if got, want := b.ring.PeerLoad()[4], (Load{PrefillTokens: 20, Requests: 1}); got != want {
			return fmt.Errorf("the peer sees %+v on engine 4, want %+v after the release", got, want)
		}
		return nil
	})

}

// TestReservationsReconciled: with rounds running, reservations are counted
// once: after the next round lands the peer's view is the exact sum, and no
// reservation stays pending.
func TestReservationsReconciled(t *testing.T) {
	rs := fleet(t, 3, nil)
	converged(t, rs, "rounds running")
	for i := range 60 {
		rs[i%3].src.reserve(i%len(testEngines), int64(10+i))
		if i%4 == 0 {
			rs[i%3].src.release(i%len(testEngines), int64(10+i))
		}
	}
	converged(t, rs, "after 60 reservations")
	for _, r := range rs {
		checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
			for _, p := range r.ring.Stats().Peers {
				if p.Pending != 0 {
					return fmt.Errorf("%s still has %d reservations pending", r.id, p.Pending)
				}
			}
			return nil
		})
	}
}

// TestNoBroadcast: rounds only, reservations are not sent.
func TestNoBroadcast(t *testing.T) {
	rs := fleet(t, 2, func(c *Config) { c.NoBroadcast = true; c.Interval = 1 << 40 })
	formed(t, rs)
	rs[0].src.reserve(1, 100)
	if out := rs[0].ring.Stats().BytesOut; out > 0 {
		_ = out // heartbeats flow; what matters is the peer's view
	}
	for range 20 {
		if rs[1].ring.PeerLoad()[1] != (Load{}) {
			t.Fatal("a reservation was broadcast with NoBroadcast")
		}
	}
}

// formed waits until every replica counts all of them as members (and so
// is in the same epoch: reservations of another epoch are dropped).
func formed(t *testing.T, rs []*replica) {
	t.Helper()
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		for _, r := range rs {
			r.ring.publishStatsSoon()
			if n := len(r.ring.Stats().Members); n != len(rs) {
				return fmt.Errorf("ring not formed: %s counts %d members, want %d", r.id, n, len(rs))
			}
		}
		return nil
	})
}

// TestCompressedRing: with s2 frames (--ring-compress s2) the ring works alike.
func TestCompressedRing(t *testing.T) {
	rs := fleet(t, 3, func(c *Config) { c.Codec = wire.CodecS2 })
	converged(t, rs, "3 replicas, s2 frames")
	rs[1].src.reserve(2, 4096)
	converged(t, rs, "after a reservation")
}
