// Package discovery keeps the engine pool's membership in line with where
// engines are found: DNS names re-resolved on an interval (A/AAAA with a
// port, or SRV for the ports: a Kubernetes headless Service), a watched
// file of addresses, and the admin API's additions; addresses given on the
// command line go to the pool directly and stay. Each source reports its
// whole current set; the union, less what an operator deleted, is what the
// pool should hold: new addresses are added (engine.Pool.Add: they take
// requests after their handshake and snapshot), vanished ones removed
// (engine.Pool.Remove: no new requests, streams finish, out of the index).
// It also hands the ring each engine's key (FollowPool). Locks:
// dataplane/LOCKS.md.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// SourceAdmin names the set of engines added through the admin API.
const SourceAdmin = "admin"

// Source is somewhere engines are found. Watch reports the source's whole
// current set of HOST:PORT addresses to set, at start and whenever it
// changes, until ctx ends; a source that cannot tell (a DNS server
// failing) reports nothing, so the last set stays.
type Source interface {
	Name() string
	Watch(ctx context.Context, set func(addrs []string))
}

// Discovery reconciles the pool with its sources. Its methods are safe for
// concurrent use.
type Discovery struct {
	pool *engine.Pool
	log  *slog.Logger

	mu   sync.Mutex          // guards sets, added, deleted; taken before the pool's membership lock
	sets map[string][]string // source name -> its addresses
	// added are the addresses this Discovery put in the pool (and will
	// remove when no source lists them); deleted are those an operator
	// deleted that some source still lists: not re-added until every
	// source has dropped them.
	added, deleted map[string]bool
	wg             sync.WaitGroup
}

// New returns a Discovery of pool with no source yet.
func New(pool *engine.Pool, log *slog.Logger) *Discovery {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Discovery{pool: pool, log: log, sets: map[string][]string{}, added: map[string]bool{}, deleted: map[string]bool{}}
}

// Start watches each source on its own goroutine until ctx ends; Wait
// joins them.
func (d *Discovery) Start(ctx context.Context, sources ...Source) {
	for _, s := range sources {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			s.Watch(ctx, func(addrs []string) { d.Set(s.Name(), addrs) })
		}()
	}
}

// Wait returns once every source's goroutine has.
func (d *Discovery) Wait() { d.wg.Wait() }

// Set replaces one source's addresses and brings the pool in line.
func (d *Discovery) Set(source string, addrs []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sets[source] = slices.Clone(addrs)
	d.reconcileLocked()
}

// reconcileLocked adds the wanted addresses the pool lacks and removes
// the ones this Discovery added that no source lists any more.
func (d *Discovery) reconcileLocked() {
	want := map[string]bool{}
	for _, set := range d.sets {
		for _, a := range set {
			want[a] = true
		}
	}
	for a := range d.deleted {
		if !want[a] {
			delete(d.deleted, a) // every source dropped it: it may come back later
		}
	}
	for a := range want {
		if d.deleted[a] {
			continue
		}
		if _, ok := d.pool.Lookup(a); ok {
			continue
		}
		if _, err := d.pool.Add(a); err != nil {
			d.log.Warn("discovery: adding an engine", "engine", a, "err", err)
			continue
		}
		d.added[a] = true
		d.log.Info("discovery: engine found", "engine", a)
	}
	for a := range d.added {
		if want[a] {
			continue
		}
		delete(d.added, a)
		if _, err := d.pool.Remove(a); err != nil && !errors.Is(err, engine.ErrUnknownEngine) {
			d.log.Warn("discovery: removing an engine", "engine", a, "err", err)
			continue
		}
		d.log.Info("discovery: engine gone from its source: removing", "engine", a)
	}
}

// AddEngine adds addr through the admin API: it stays until deleted. An
// address already in the pool is refused (engine.ErrEngineExists).
func (d *Discovery) AddEngine(addr string) (*engine.Engine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.pool.Lookup(addr); ok {
		return e, fmt.Errorf("%w: %s", engine.ErrEngineExists, addr)
	}
	e, err := d.pool.Add(addr)
	if err != nil {
		return e, err
	}
	delete(d.deleted, addr)
	d.sets[SourceAdmin] = append(d.sets[SourceAdmin], addr)
	d.added[addr] = true
	return e, nil
}

// RemoveEngine removes the engine whose address or handshake id is key,
// whichever source found it; a source that still lists it does not bring
// it back until it has dropped it once.
func (d *Discovery) RemoveEngine(key string) (*engine.Engine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, err := d.pool.Remove(key)
	if err != nil {
		return nil, err
	}
	d.sets[SourceAdmin] = slices.DeleteFunc(d.sets[SourceAdmin], func(a string) bool { return a == e.Addr })
	delete(d.added, e.Addr)
	for _, set := range d.sets {
		if slices.Contains(set, e.Addr) {
			d.deleted[e.Addr] = true
		}
	}
	return e, nil
}

// DrainEngine drains the engine whose address or handshake id is key: it
// takes no new request, finishes its streams, leaves the index, and stays
// listed as drained until removed (by RemoveEngine or its source).
func (d *Discovery) DrainEngine(key string) (*engine.Engine, error) { return d.pool.Drain(key) }

// Engines lists the pool's engines.
func (d *Discovery) Engines() []*engine.Engine { return d.pool.Engines() }
