package syncring

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// source is a LoadSource whose loads a test sets.
type source struct {
	mu    sync.Mutex
	loads []Load
	ring  *Ring
}

func (s *source) ReadLoad(dst []Load, mark func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(dst, s.loads)
	mark()
}

func (s *source) set(loads []Load) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads = append(s.loads[:0], loads...)
}

// reserve adds a request to engine e and broadcasts it, as the router does.
func (s *source) reserve(e int, prefill int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads[e].PrefillTokens += prefill
	s.loads[e].Requests++
	s.ring.Reserve(e, Load{PrefillTokens: prefill, Requests: 1})
}

// release ends a request of engine e before its first token, as the
// router's Done does, and broadcasts it.
func (s *source) release(e int, prefill int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads[e].PrefillTokens -= prefill
	s.loads[e].Requests--
	s.ring.Reserve(e, Load{PrefillTokens: -prefill, Requests: -1})
}

func (s *source) get() []Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Load(nil), s.loads...)
}

var testEngines = []string{"e0:1", "e1:1", "e2:1", "e3:1", "e4:1", "e5:1", "e6:1"}

// testConfig is a fast ring for loopback tests.
func testConfig(id string, peers []string, src *source) Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.Peers, cfg.Source, cfg.Engines = id, peers, src, testEngines
	cfg.Secret = []byte("ring-secret")
	cfg.Interval, cfg.Heartbeat, cfg.DeadAfter, cfg.RoundTimeout = 2*time.Millisecond, 20*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
	return cfg
}

// replica is one member of a test fleet.
type replica struct {
	id   string
	addr string
	src  *source
	ring *Ring
}

func loadsFor(i int) []Load {
	out := make([]Load, len(testEngines))
	for e := range out {
		out[e] = Load{PrefillTokens: int64(100*i + e), DecodeTokens: int64(1000*i + 7*e), Requests: int64(i + 1)}
	}
	return out
}

// fleet starts n replicas that list each other (and themselves) as peers.
func fleet(t *testing.T, n int, tweak func(*Config)) []*replica {
	t.Helper()
	lns := make([]net.Listener, n)
	var addrs []string
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs = ln, append(addrs, ln.Addr().String())
	}
	rs := make([]*replica, n)
	for i := range n {
		rs[i] = &replica{id: fmt.Sprintf("r%02d", i), addr: addrs[i], src: &source{loads: loadsFor(i)}}
		rs[i].start(t, addrs, lns[i], tweak)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			if r.ring != nil {
				r.ring.Close()
			}
		}
	})
	return rs
}

func (r *replica) start(t *testing.T, peers []string, ln net.Listener, tweak func(*Config)) {
	t.Helper()
	cfg := testConfig(r.id, peers, r.src)
	cfg.Listener = ln
	if ln == nil {
		cfg.Listen = r.addr
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ring, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.src.mu.Lock()
	r.ring, r.src.ring = ring, ring
	r.src.mu.Unlock()
}

func (r *replica) stop() {
	r.ring.Close()
	r.ring = nil
}

// sumOf is the fleet's true load: the sum of the live replicas' own loads.
func sumOf(rs []*replica) []Load {
	out := make([]Load, len(testEngines))
	for _, r := range rs {
		if r.ring == nil {
			continue
		}
		for e, l := range r.src.get() {
			out[e].PrefillTokens += l.PrefillTokens
			out[e].DecodeTokens += l.DecodeTokens
			out[e].Requests += l.Requests
		}
	}
	return out
}

// agrees reports whether r's global view (own + peers) equals want.
func (r *replica) agrees(want []Load) bool {
	own, peers := r.src.get(), r.ring.PeerLoad()
	for e := range want {
		if own[e].PrefillTokens+peers[e].PrefillTokens != want[e].PrefillTokens || own[e].DecodeTokens+peers[e].DecodeTokens != want[e].DecodeTokens ||
			own[e].Requests+peers[e].Requests != want[e].Requests {
			return false
		}
	}
	return true
}

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed. It is the package's one way
// to wait for something another goroutine does: the tests wait for
// convergence, they never time it, so timeouts are generous (CI is a
// loaded 2-core machine).
func checkFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(interval) // the poll interval
	}
}

// converged waits until every live replica's view is the live sum and
// they all count the same members.
func converged(t *testing.T, rs []*replica, what string) {
	t.Helper()
	live := 0
	for _, r := range rs {
		if r.ring != nil {
			live++
		}
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		want := sumOf(rs)
		for _, r := range rs {
			if r.ring == nil {
				continue
			}
			if n := len(r.ring.Stats().Members); n != live {
				return fmt.Errorf("%s: %s counts %d members, want %d", what, r.id, n, live)
			}
			if !r.agrees(want) {
				return fmt.Errorf("%s: %s's view is not the sum of the live replicas' loads", what, r.id)
			}
		}
		return nil
	})
}
