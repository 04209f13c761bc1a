package syncring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// LoadSource is this replica's own exact load, read at the start of every
// round.
type LoadSource interface {
	// ReadLoad fills dst (one entry per caller position of Config.Engines
	// or SetEngines; dst starts zeroed).
	// It must call mark exactly once while no reservation can be made, so
	// that every Reserve made before mark is in dst and none made after it:
	// that is what lets peers reconcile broadcast reservations exactly.
	ReadLoad(dst []Load, mark func())
}

// Config configures a replica's part in the ring.
type Config struct {
	// ID names this replica; unique in the fleet. The ring is ordered by ID.
	ID string
	// Listen is the ring address ("host:port"; port 0 picks one), unless
	// Listener is given.
	Listen   string
	Listener net.Listener
	// Peers are the other replicas' ring addresses. A name that resolves to
	// several addresses (a Kubernetes headless Service) stands for all of
	// them; names are re-resolved every ResolveEvery. This replica's own
	// address may be listed: it is recognised and skipped.
	Peers []string
	// Secret, when set, is required of every peer (HMAC challenge-response,
	// as in the wire protocol).
	Secret []byte
	// Engines are this replica's engine keys at start, by the caller's
	// position ("" for a free position): LoadSource, PeerLoad and Reserve
	// index engines the same way. SetEngines replaces them. Replicas
	// reduce over the keys they all have (engines.go).
	Engines []string
	// Interval is how often the ring reduces load (the leader's clock).
	Interval time.Duration
	// Heartbeat is how often a replica tells peers it is alive; DeadAfter is
	// how long silence takes to drop a peer from the ring.
	Heartbeat, DeadAfter time.Duration
	// RoundTimeout abandons a round that has not completed.
	RoundTimeout time.Duration
	// ResolveEvery re-resolves Peers names.
	ResolveEvery time.Duration
	// DigestEvery is how often replicas exchange index digests.
	DigestEvery time.Duration
	// NoBroadcast turns reservation broadcast off (rounds only), for
	// experiments.
	NoBroadcast bool
	// Codec compresses ring frames (CodecNone by default: measured in
	// perf/RESULTS.md, delta-encoded chunks do not shrink enough to pay).
	Codec wire.Codec
	// Source is this replica's own load.
	Source LoadSource
	// Digest returns this replica's index digest; Similarity compares two
	// (0..1). Both optional.
	Digest     func() []byte
	Similarity func(a, b []byte) float64
	Logger     *slog.Logger
	// HandshakeTimeout ends an inbound handshake that has not completed;
	// MaxHandshakes bounds the inbound connections held before theirs
	// completes, closing the oldest at the bound (wire.HandshakeGate).
	HandshakeTimeout time.Duration
	MaxHandshakes    int
	// Resolve looks up a host's addresses (tests replace it).
	Resolve func(ctx context.Context, host string) ([]string, error)
}

// DefaultConfig returns the ring's default timing.
func DefaultConfig() Config {
	return Config{Interval: 5 * time.Millisecond, Heartbeat: 100 * time.Millisecond, DeadAfter: 500 * time.Millisecond,
		RoundTimeout: 200 * time.Millisecond, ResolveEvery: 5 * time.Second, DigestEvery: time.Second,
		HandshakeTimeout: 5 * time.Second, MaxHandshakes: wire.DefaultMaxHandshakes}
}

// Ring is one replica's part in the replica ring.
type Ring struct {
	cfg         Config
	log         *slog.Logger
	incarnation uint64
	ln          net.Listener
	root        context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	events      chan any // to the loop: inbound, linkUp, linkDown

	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	gate   *wire.HandshakeGate // inbound connections before their handshake completes

	view  atomic.Pointer[[]Load] // peers' load: last round + pending reservations
	stats atomic.Pointer[Stats]

	snap    atomic.Uint64             // snapshots of own load taken (see LoadSource)
	vmap    atomic.Pointer[vectorMap] // current epoch and its vector positions, for Reserve
	links   atomic.Pointer[[]*link]
	res     reserver
	metrics counters

	loop loopState // owned by the loop goroutine
}

// counters are updated from several goroutines.
type counters struct {
	bytesIn, bytesOut, refused, ignored, dropped atomic.Uint64
}

// Errors of Start.
var errConfig = errors.New("syncring: configuration")

// Start listens on cfg.Listen and joins the ring.
func Start(cfg Config) (*Ring, error) {
	r, err := newRing(cfg)
	if err != nil {
		return nil, err
	}
	ln := r.cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", r.cfg.Listen); err != nil {
			return nil, fmt.Errorf("syncring: ring listener: %w", err)
		}
	}
	r.ln = ln
	ctx := r.root
	r.wg.Add(3)
	go func() { defer r.wg.Done(); r.acceptLoop(ctx, ln) }()
	go func() { defer r.wg.Done(); r.resolveLoop(ctx) }()
	go func() { defer r.wg.Done(); r.run(ctx) }()
	r.log.Info("ring: joined", "id", r.cfg.ID, "listen", ln.Addr().String(), "peers", r.cfg.Peers,
		"interval", r.cfg.Interval.String(), "engines", len(r.cfg.Engines))
	return r, nil
}

// newRing checks cfg and builds a ring that is not yet listening or running.
func newRing(cfg Config) (*Ring, error) {
	def := DefaultConfig()
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.Interval, def.Interval}, {&cfg.Heartbeat, def.Heartbeat}, {&cfg.DeadAfter, def.DeadAfter},
		{&cfg.RoundTimeout, def.RoundTimeout}, {&cfg.ResolveEvery, def.ResolveEvery}, {&cfg.DigestEvery, def.DigestEvery},
		{&cfg.HandshakeTimeout, def.HandshakeTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	switch {
	case cfg.ID == "":
		return nil, fmt.Errorf("%w: a replica id is required", errConfig)
	case cfg.Source == nil:
		return nil, fmt.Errorf("%w: no load source", errConfig)
	case cfg.DeadAfter <= cfg.Heartbeat:
		return nil, fmt.Errorf("%w: dead-after %v must exceed the heartbeat %v", errConfig, cfg.DeadAfter, cfg.Heartbeat)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolve == nil {
		cfg.Resolve = net.DefaultResolver.LookupHost
	}
	seen := map[string]bool{}
	for _, e := range cfg.Engines {
		if seen[e] && e != "" {
			return nil, fmt.Errorf("%w: engine %q listed twice", errConfig, e)
		}
		seen[e] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Ring{cfg: cfg, log: cfg.Logger, incarnation: uint64(time.Now().UnixNano()),
		root: ctx, cancel: cancel, events: make(chan any, 4096), conns: map[net.Conn]struct{}{},
		gate: wire.NewHandshakeGate(cfg.MaxHandshakes)}
	r.res.init(r)
	zero := make([]Load, len(cfg.Engines))
	r.view.Store(&zero)
	r.links.Store(&[]*link{})
	r.loop.init(r)
	r.publishStats()
	return r, nil
}

// Addr is the ring listener's address.
func (r *Ring) Addr() string { return r.ln.Addr().String() }

// ID is this replica's id.
func (r *Ring) ID() string { return r.cfg.ID }

// PeerLoad returns the rest of the fleet's load on every engine, by the
// caller's position (zero for an engine the members do not all share): the
// peers' contributions from the last completed round plus the reservations
// they broadcast since. It never blocks; the slice must not be modified.
func (r *Ring) PeerLoad() []Load { return *r.view.Load() }

// Close leaves the ring: connections close, peers re-form without it.
func (r *Ring) Close() {
	r.cancel()
	_ = r.ln.Close()
	r.res.stop()
	r.connMu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.connMu.Unlock()
	for _, l := range *r.links.Load() {
		l.close()
	}
	r.wg.Wait()
}

// post hands an event to the loop unless the ring is closing.
func (r *Ring) post(ctx context.Context, ev any) bool {
	select {
	case r.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

type (
	inbound struct {
		from string
		msg  *message
	}
	linkUp   struct{ l *link }
	linkDown struct{ l *link }
)

// run is the ring loop: membership, rounds, heartbeats and digests. It owns
// loopState; nothing it does waits on the network.
func (r *Ring) run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Interval)
	hb := time.NewTicker(r.cfg.Heartbeat)
	dg := time.NewTicker(r.cfg.DigestEvery)
	defer tick.Stop()
	defer hb.Stop()
	defer dg.Stop()
	s := &r.loop
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.events:
			switch ev := ev.(type) {
			case inbound:
				s.receive(ev.from, ev.msg)
			case linkUp:
				s.linkUp(ev.l)
			case linkDown:
				s.linkDown(ev.l)
			case refreshStats:
				s.publishStats()
			case enginesChanged:
				s.setEngines(ev.keys)
			}
		case <-tick.C:
			s.tick()
		case <-hb.C:
			s.heartbeat()
		case <-dg.C:
			s.sendDigest()
		}
	}
}
