package route

import (
	"sync"
	"testing"

	"github.com/kvgate/kvgate/syncring"
)

// fakeFleet is a Fleet with set peer loads that records reservations.
type fakeFleet struct {
	mu       sync.Mutex
	peers    []syncring.Load
	reserved map[int]int64
}

func (f *fakeFleet) PeerLoad() []syncring.Load { return f.peers }

func (f *fakeFleet) Reserve(engine int, d syncring.Load) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reserved[engine] += d.PrefillTokens
}

// TestFleetLoadSteersRouting: the peers' load counts like this router's own
// (least-load and kv avoid an engine the peers filled), every decision is
// broadcast with the engine's pool index, and ReadLoad reports own load
// with the mark inside it.
func TestFleetLoadSteersRouting(t *testing.T) {
	pool := simPool(t, 2)
	for _, p := range []Policy{PolicyLeastLoad, PolicyKV} {
		f := &fakeFleet{peers: make([]syncring.Load, 2), reserved: map[int]int64{}}
		f.peers[0] = syncring.Load{PrefillTokens: 1 << 20, DecodeTokens: 1 << 20, Requests: 500}
		r := New(pool, p, DefaultWeights())
		r.SetFleet(f)
		req := &Request{Model: "kvgate/sim", Tokens: make([]uint32, 64)}
		for range 10 {
			d, err := r.Route(req)
			if err != nil {
				t.Fatal(err)
			}
			if d.Engine != pool.Engines()[1] {
				t.Fatalf("%s routed to the engine the peers filled", p)
			}
		}
		if f.reserved[1] != 10*64 || f.reserved[0] != 0 {
			t.Fatalf("%s broadcast %v, want 640 prefill tokens on engine 1", p, f.reserved)
		}
		marked := false
		own := make([]syncring.Load, 2)
		r.ReadLoad(own, func() { marked = true })
		if !marked || own[1].Requests != 10 || own[1].PrefillTokens != 640 || own[0] != (syncring.Load{}) {
			t.Fatalf("%s ReadLoad: %+v marked=%v", p, own, marked)
		}
		if got := r.PeerLoad(pool.Engines()[0]); got != f.peers[0] {
			t.Fatalf("PeerLoad %+v", got)
		}
	}
}
