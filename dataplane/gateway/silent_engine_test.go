package gateway

import (
	"net"
	"sync"
	"testing"

	"github.com/kvgate/kvgate/wire"
	wireserve "github.com/kvgate/kvgate/wire/serve"
)

// silentEngine takes every GENERATE and never answers it, as a hung
// engine (or a decode engine whose KV transfer never lands): no frame
// comes on the stream until the router cancels it.
type silentEngine struct {
	srv   *wireserve.Server
	check func(*wire.Generate) string // what is wrong with a GENERATE, "" if nothing; nil: anything goes

	mu                   sync.Mutex
	generated, cancelled int
	reason               string // the first thing check found wrong
}

// startSilentEngine serves a silentEngine on a loopback port as id, with
// features, checking each GENERATE with check (nil: none).
func startSilentEngine(t *testing.T, id string, features wire.Feature, check func(*wire.Generate) string) (*silentEngine, string) {
	t.Helper()
	b := &silentEngine{check: check}
	b.srv = wireserve.New(wireserve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained,
		ID: id, Features: features, BlockSize: 16, MaxBatchedTokens: 8192, Models: []string{model}}}, b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(b.srv.Close)
	return b, ln.Addr().String()
}

// Generate takes a request and sends nothing for it.
func (b *silentEngine) Generate(_ wireserve.Key, g *wire.Generate) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.generated++
	if b.check != nil && b.reason == "" {
		b.reason = b.check(g)
	}
	return nil
}

// Cancel counts the router's cancel of a stream.
func (b *silentEngine) Cancel(wireserve.Key) {
	b.mu.Lock()
	b.cancelled++
	b.mu.Unlock()
}

// Load reports an idle engine.
func (b *silentEngine) Load() []wire.Load { return []wire.Load{{}} }

// Snapshot answers with an empty cache.
func (b *silentEngine) Snapshot(conn uint64, id uint32) {
	_ = b.srv.SendTo(conn, &wire.Snapshot{SnapshotID: id, Last: true})
}

// Idle reports that nothing runs.
func (b *silentEngine) Idle() bool { return true }

func (b *silentEngine) counts() (generated, cancelled int, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.generated, b.cancelled, b.reason
}
