package syncring

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestDifferentEngineSets: two replicas whose engine lists differ (r01
// lacks e0, has x, and lists its engines at other positions) keep one ring,
// reduce over the six engines they share, each by its own positions; when
// r01's list becomes r00's, they converge on all seven.
func TestDifferentEngineSets(t *testing.T) {
	r01Keys := []string{"x:1", "e6:1", "e5:1", "e4:1", "e3:1", "e2:1", "e1:1"}
	rs := fleet(t, 2, func(c *Config) {
		if c.ID == "r01" {
			c.Engines = r01Keys
		}
	})
	a, b := rs[0], rs[1]
	bLoads := make([]Load, len(r01Keys))
	for i := range bLoads {
		bLoads[i] = Load{PrefillTokens: int64(1000 + i), DecodeTokens: int64(10 * i), Requests: int64(i + 1)}
	}
	b.src.set(bLoads)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		sa, sb := a.ring.Stats(), b.ring.Stats()
		if len(sa.Members) != 2 || len(sb.Members) != 2 || sa.SharedEngines != 6 || sb.SharedEngines != 6 {
			return fmt.Errorf("members %v / %v, shared %d / %d", sa.Members, sb.Members, sa.SharedEngines, sb.SharedEngines)
		}
		pa, pb := a.ring.PeerLoad(), b.ring.PeerLoad()
		for bi, key := range r01Keys {
			ai := indexOf(testEngines, key)
			var wantA Load // a's view of b's load on key
			if ai >= 0 {
				wantA = bLoads[bi]
				if pb[bi] != a.src.get()[ai] {
					return fmt.Errorf("%s: r01 sees %+v of r00's load, r00 has %+v", key, pb[bi], a.src.get()[ai])
				}
				if pa[ai] != wantA {
					return fmt.Errorf("%s: r00 sees %+v of r01's load, want %+v", key, pa[ai], wantA)
				}
			} else if pb[bi] != (Load{}) {
				return fmt.Errorf("%s is r01's alone, yet it sees peer load %+v there", key, pb[bi])
			}
		}
		if pa[0] != (Load{}) {
			return fmt.Errorf("e0 is r00's alone, yet it sees peer load %+v there", pa[0])
		}
		return nil
	})
	epoch := a.ring.Stats().Epoch

	b.ring.SetEngines(testEngines)
	b.src.set(loadsFor(1))
	converged(t, rs, "the same engines")
	if st := a.ring.Stats(); st.SharedEngines != len(testEngines) || st.Epoch == epoch {
		t.Fatalf("after the views met: shared %d, epoch %d (was %d)", st.SharedEngines, st.Epoch, epoch)
	}
}

func indexOf(keys []string, k string) int {
	for i, key := range keys {
		if key == k {
			return i
		}
	}
	return -1
}

// TestSharedKeys: the vector covers the keys every member announced, and
// maps them to the caller's positions; a duplicate counts once.
func TestSharedKeys(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Source, cfg.Engines = "b", &source{}, []string{"k3", "", "k1", "k2"}
	r, err := newRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &r.loop
	s.peer("a").hb.EngineKeys = []string{"k1", "k3", "k9"}
	s.peer("c").hb.EngineKeys = []string{"k0", "k1", "k3"}
	shared := s.sharedKeys([]string{"a", "b", "c"})
	if fmt.Sprint(shared) != "[k1 k3]" {
		t.Fatalf("shared %v, want [k1 k3]", shared)
	}
	s.shared = shared
	s.remap()
	if m := r.vmap.Load(); fmt.Sprint(m.posOf) != "[1 -1 0 -1]" || fmt.Sprint(s.order) != "[2 0]" {
		t.Fatalf("posOf %v order %v", m.posOf, s.order)
	}
	s.setEngines([]string{"k1", "k1", "k3"})
	if fmt.Sprint(s.local) != "[k1 k3]" {
		t.Fatalf("local keys of a list with a duplicate: %v", s.local)
	}
}

// TestFormatOnePeerRefused: a replica without FeatureRingByKey (format 1,
// engines by position) is refused at the handshake with ERROR VERSION.
func TestFormatOnePeerRefused(t *testing.T) {
	rs := fleet(t, 1, nil)
	old := &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RolePeer, ID: "old"}, Secret: []byte("ring-secret")}
	nc, err := net.Dial("tcp", rs[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, err = wire.Client(t.Context(), nc, old, nil)
	if !errors.Is(err, wire.ErrVersion) {
		t.Fatalf("a format-1 replica's handshake: %v, want ERROR VERSION", err)
	}
}

// TestHeartbeatSize: a HEARTBEAT grows by 2 bytes plus the key per engine
// (RING.md), so 256 engines named by 20-byte ids cost 5.6 KB per peer per
// heartbeat.
func TestHeartbeatSize(t *testing.T) {
	base := len(appendHeartbeat(nil, 1, &heartbeat{Hears: []string{"r1"}}))
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = fmt.Sprintf("engine-%013d", i) // 20 bytes
	}
	got := len(appendHeartbeat(nil, 1, &heartbeat{Hears: []string{"r1"}, EngineKeys: keys}))
	if want := base + 256*(2+20); got != want {
		t.Fatalf("heartbeat with 256 keys: %d bytes, want %d", got, want)
	}
	t.Logf("heartbeat: %d bytes without engines, %d with 256 engine keys of 20 bytes", base, got)
}

// TestReserveByKey: a reservation crosses at the engine's place among the
// shared keys, stamped with the epoch of that layout; one on an engine the
// members do not share, or on a free position, is not sent; after the
// shared keys change, the new layout and epoch apply.
func TestReserveByKey(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.Source, cfg.Engines = "b", &source{}, []string{"k3", "", "k1"}
	r, err := newRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &r.loop
	l := &link{id: "a", q: make(chan []byte, 64), closed: make(chan struct{})}
	s.linkUp(l)
	p := s.peers["a"]
	p.hbSeen, p.heard = true, time.Now()
	p.hb = heartbeat{Incarnation: 7, EngineKeys: []string{"k1", "k3", "k9"}, Hears: []string{"b"}}
	s.reform()
	quiet := func() { // no reservation went out lately: the next one goes at once
		r.res.mu.Lock()
		r.res.last = time.Time{}
		r.res.mu.Unlock()
	}
	next := func() (uint64, []reservation) {
		t.Helper()
		for {
			select {
			case body := <-l.q:
				var m message
				if err := decodeMessage(body, &m, noBase); err != nil {
					t.Fatal(err)
				}
				if m.Kind == kindReserve {
					return m.Epoch, m.Reserve.Items
				}
			default:
				return 0, nil
			}
		}
	}
	drain(l)
	r.Reserve(0, Load{PrefillTokens: 5, Requests: 1}) // k3: second shared key
	epoch, items := next()
	if epoch != s.epoch || len(items) != 1 || items[0].Engine != 1 || items[0].PrefillTokens != 5 {
		t.Fatalf("reservation on k3: epoch %d (want %d), %+v", epoch, s.epoch, items)
	}
	quiet()
	r.Reserve(1, Load{Requests: 1}) // a free position
	if _, items := next(); items != nil {
		t.Fatalf("a free position was broadcast: %+v", items)
	}
	old := s.epoch
	p.hb.EngineKeys = []string{"k1"}
	s.reform() // k3 is not shared any more
	if s.epoch == old || len(s.shared) != 1 {
		t.Fatalf("shared %v, epoch unchanged %v", s.shared, s.epoch == old)
	}
	quiet()
	r.Reserve(0, Load{Requests: 1}) // k3: not shared
	if _, items := next(); items != nil {
		t.Fatalf("an unshared engine was broadcast: %+v", items)
	}
	quiet()
	r.Reserve(2, Load{Requests: 1}) // k1: the only shared key
	if epoch, items := next(); epoch != s.epoch || len(items) != 1 || items[0].Engine != 0 {
		t.Fatalf("reservation on k1 after the change: epoch %d (want %d), %+v", epoch, s.epoch, items)
	}
}
