package route

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/engine"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// idleBackend is an engine that accepts requests and never answers: what
// routing needs of an engine is its handshake and the index.
type idleBackend struct{}

func (idleBackend) Generate(serve.Key, *wire.Generate) error { return nil }
func (idleBackend) Cancel(serve.Key)                         {}
func (idleBackend) Load() []wire.Load                        { return []wire.Load{{}} }
func (idleBackend) Snapshot(uint64, uint32)                  {}
func (idleBackend) Idle() bool                               { return true }

// tieredEngine serves a handshake announcing a CPU tier whose link carries
// bytesPerSecond.
func tieredEngine(t *testing.T, id string, bytesPerSecond uint64) string {
	t.Helper()
	h := wire.Handshake{Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained, ID: id, BlockSize: 16, MaxBatchedTokens: 8192,
		Models: []string{"m"}, Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: 1 << 16}, {Tier: wire.TierCPU, Blocks: 1 << 18}}}
	if bytesPerSecond > 0 {
		h.TierCosts = wire.TierCosts{BlockBytes: 2359296, Links: []wire.TierLink{{Tier: wire.TierCPU, LatencyNanos: 10_000, BytesPerSecond: bytesPerSecond}}}
	}
	s := serve.New(serve.Config{Handshake: h}, idleBackend{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Close)
	return ln.Addr().String()
}

// TestRouteByAnnouncedTierCosts: kvgate weighs a CPU hit by the link the
// engine announced in its handshake. The whole prompt in CPU memory
// behind a PCIe 4.0 link (25 GB/s) beats recomputing it on an empty
// engine; behind a 0.5 GB/s link it loses to it.
func TestRouteByAnnouncedTierCosts(t *testing.T) {
	addrs := []string{tieredEngine(t, "fast", 25e9), tieredEngine(t, "slow", 5e8), tieredEngine(t, "empty", 0)}
	pool := engine.NewPool(engine.DefaultConfig(), kvstore.New(kvstore.Options{}), addrs)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.WaitReady(ctx, len(addrs)); err != nil {
		t.Fatal(err)
	}
	byID := map[string]*engine.Engine{}
	for _, e := range pool.Engines() {
		byID[e.Info().ID] = e
	}
	if tc := byID["slow"].Info().TierCosts; len(tc.Links) != 1 || tc.Links[0].BytesPerSecond != 5e8 {
		t.Fatalf("the router read tier costs %+v from the slow engine's handshake", tc)
	}
	prompt := func(seed uint32) []uint32 {
		p := make([]uint32, 4096+1)
		for i := range p {
			p[i] = seed<<20 + uint32(i)
		}
		return p
	}
	// fast and slow each hold their own prompt in CPU memory.
	for id, seed := range map[string]uint32{"fast": 1, "slow": 2} {
		e := byID[id]
		hs, err := e.Hasher().Hash(nil, prompt(seed), nil)
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := e.Slot()
		if err := pool.Index().Apply(slot, []kvstore.Event{{Kind: kvstore.Stored, Tier: kvstore.TierCPU, Hashes: hs}}); err != nil {
			t.Fatal(err)
		}
	}
	r := New(pool, PolicyKV, DefaultWeights())
	for range 20 {
		d, err := r.Route(&Request{Model: "m", Tokens: prompt(1)})
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
		if got := d.Engine.Info().ID; got != "fast" || d.Match.Blocks[kvstore.TierCPU] != 256 {
			t.Fatalf("prompt in fast's CPU tier went to %s (match %+v)", got, d.Match)
		}
		d, err = r.Route(&Request{Model: "m", Tokens: prompt(2)})
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
		if got := d.Engine.Info().ID; got == "slow" {
			t.Fatalf("prompt in slow's CPU tier went to slow: 256 blocks at 0.5 GB/s take 1.2 s, recomputing 4,096 tokens 62 ms")
		}
	}
}
