package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Config configures the engine pool. Health (health.go): the router PINGs
// each engine every PingInterval; an engine that sends nothing, not even
// PONG, for PingTimeout after a PING is unresponsive: not ready, and its
// open streams end with ErrUnresponsive (which wraps ErrEngineDown, so a
// request before its first token is re-routed) and are cancelled on it.
// The first frame it sends makes it ready again on the same connection;
// after DropAfter of silence the connection is dropped and redialed.
type Config struct {
	RouterID     string
	Secret       []byte
	DialTimeout  time.Duration
	PingInterval time.Duration
	PingTimeout  time.Duration
	DropAfter    time.Duration
	// TokenTimeout ends a stream that has had its first token and then
	// nothing for this long (ErrTokenTimeout), and cancels it on the
	// engine; 0: no bound.
	TokenTimeout time.Duration
	// WriteTimeout bounds each write to an engine; a write that takes
	// longer ends the connection.
	WriteTimeout time.Duration
	// SnapshotWait bounds how long an engine that answers SNAPSHOT_REQUEST
	// waits for its snapshot before it takes requests (membership.go).
	SnapshotWait time.Duration
	// DrainTimeout bounds how long a drained or removed engine keeps its
	// open streams; those still open then end with ErrEngineDown.
	DrainTimeout time.Duration
	// GroupBlind asks engines for no KV cache groups and indexes each
	// engine as one full-attention cache, as routers from before groups
	// did: a baseline for measurements (cmd/kvgate-bench).
	GroupBlind bool
	Limits     wire.Limits
	Logger     *slog.Logger
}

// DefaultConfig returns the pool defaults.
func DefaultConfig() Config {
	return Config{RouterID: "kvgate", DialTimeout: 5 * time.Second, PingInterval: time.Second, PingTimeout: 3 * time.Second,
		DropAfter: 30 * time.Second, TokenTimeout: time.Minute, WriteTimeout: 10 * time.Second,
		SnapshotWait: 5 * time.Second, DrainTimeout: 5 * time.Minute, Limits: wire.DefaultLimits()}
}

// Validate reports settings the pool cannot run with.
func (c *Config) Validate() error {
	switch {
	case c.DialTimeout <= 0 || c.PingInterval <= 0 || c.WriteTimeout <= 0:
		return fmt.Errorf("engine: dial timeout %v, ping interval %v and write timeout %v must be positive", c.DialTimeout, c.PingInterval, c.WriteTimeout)
	case c.PingTimeout <= 0 || c.DropAfter < c.PingTimeout:
		return fmt.Errorf("engine: ping timeout %v must be positive and drop-after %v at least as long", c.PingTimeout, c.DropAfter)
	case c.TokenTimeout < 0:
		return fmt.Errorf("engine: token timeout %v is negative", c.TokenTimeout)
	case c.SnapshotWait < 0 || c.DrainTimeout < 0:
		return fmt.Errorf("engine: snapshot wait %v and drain timeout %v must not be negative", c.SnapshotWait, c.DrainTimeout)
	}
	return c.Limits.Validate()
}

// Pool is the set of engines a router knows, with the shared KV index.
// Engines join (Add) and leave (Remove, Drain) at run time: membership.go.
type Pool struct {
	cfg   Config
	log   *slog.Logger
	index *kvstore.Index
	// engines is the published membership: a new slice on every change,
	// never modified once stored, so routing reads it without a lock.
	engines atomic.Pointer[[]*Engine]
	mem     membership // guarded by mem.mu
	metrics poolMetrics
	hashMu  sync.Mutex
	hashers map[kvstore.HashConfig]*kvstore.Hasher // shared: a router hashes a prompt once per scheme
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type poolMetrics struct {
	eventsApplied atomic.Uint64
}

// NewPool connects to every address (in the background, reconnecting).
// Zero durations in cfg take their defaults (TokenTimeout 0 stays off);
// Validate first to refuse them instead.
func NewPool(cfg Config, index *kvstore.Index, addrs []string) *Pool {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	def := DefaultConfig()
	for _, d := range []struct{ v, def *time.Duration }{{&cfg.DialTimeout, &def.DialTimeout},
		{&cfg.PingInterval, &def.PingInterval}, {&cfg.PingTimeout, &def.PingTimeout},
		{&cfg.DropAfter, &def.DropAfter}, {&cfg.WriteTimeout, &def.WriteTimeout}} {
		if *d.v <= 0 {
			*d.v = *d.def
		}
	}
	cfg.DropAfter = max(cfg.DropAfter, cfg.PingTimeout)
	if cfg.SnapshotWait == 0 {
		cfg.SnapshotWait = def.SnapshotWait
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = def.DrainTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, log: cfg.Logger, index: index, ctx: ctx, cancel: cancel, hashers: map[kvstore.HashConfig]*kvstore.Hasher{}}
	p.mem.init()
	p.engines.Store(&[]*Engine{})
	for _, a := range addrs {
		if _, err := p.Add(a); err != nil {
			p.log.Warn("engine listed twice", "engine", a, "err", err)
		}
	}
	return p
}

// Engines returns every engine, ready or not: a snapshot of the
// membership, which the caller must not modify.
func (p *Pool) Engines() []*Engine { return *p.engines.Load() }

// Index returns the shared KV block index.
func (p *Pool) Index() *kvstore.Index { return p.index }

// EventsApplied counts KV events applied to the index.
func (p *Pool) EventsApplied() uint64 { return p.metrics.eventsApplied.Load() }

// WaitReady waits until n engines are ready or ctx ends.
func (p *Pool) WaitReady(ctx context.Context, n int) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		ready := 0
		for _, e := range p.Engines() {
			if e.Ready() {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: %d of %d engines ready: %w", ready, n, ctx.Err())
		case <-t.C:
		}
	}
}

// hasher returns the one Hasher of a hash configuration, so engines with
// the same scheme share it and a prompt is hashed once for all of them.
func (p *Pool) hasher(cfg kvstore.HashConfig) (*kvstore.Hasher, error) {
	p.hashMu.Lock()
	defer p.hashMu.Unlock()
	if h, ok := p.hashers[cfg]; ok {
		return h, nil
	}
	h, err := kvstore.NewHasher(cfg)
	if err != nil {
		return nil, err
	}
	p.hashers[cfg] = h
	return h, nil
}

// checkEngine refuses an engine whose hash scheme the router cannot use.
func (p *Pool) checkEngine(h *wire.Handshake) error {
	switch {
	case h.Role != wire.RoleEngine:
		return fmt.Errorf("peer %q is not an engine (role %d)", h.ID, h.Role)
	case h.HashScheme != wire.HashXXH3Chained:
		return fmt.Errorf("engine %q uses hash scheme %d, kvgate needs %d (xxh3-chained)", h.ID, h.HashScheme, wire.HashXXH3Chained)
	case h.BlockSize == 0 || h.BlockSize > kvstore.MaxBlockSize:
		return fmt.Errorf("engine %q block size %d", h.ID, h.BlockSize)
	case len(h.Models) == 0:
		return fmt.Errorf("engine %q serves no model", h.ID)
	}
	return nil
}

// Close disconnects from every engine.
func (p *Pool) Close() {
	p.mem.mu.Lock()
	p.mem.closed = true
	p.mem.mu.Unlock()
	p.cancel() // each session closes its connection (session.go)
	p.wg.Wait()
}
