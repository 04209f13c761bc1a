package engine

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// Engines join and leave a running pool. Add starts an engine's connection
// goroutine at once; the engine takes requests after its handshake and,
// when it answers SNAPSHOT_REQUEST, once its snapshot is in the index (or
// after Config.SnapshotWait). Drain and Remove take it out of routing at
// once (Ready is false from then on), let its open streams finish (for at
// most Config.DrainTimeout), then disconnect it and remove its slots from
// the index; Remove also takes it out of Engines, Drain leaves it listed as
// StateDrained. The membership lock is a leaf: it is held over no other
// lock (dataplane/LOCKS.md).

// membership is the pool's set of engines, guarded by mu.
type membership struct {
	mu      sync.Mutex
	byAddr  map[string]*Engine
	free    []int // positions of engines that left, reused lowest first
	next    int   // the next position never used
	closed  bool
	changed chan struct{} // closed and replaced on every change
}

func (m *membership) init() {
	m.byAddr = map[string]*Engine{}
	m.changed = make(chan struct{})
}

func (m *membership) takePos() int {
	if len(m.free) > 0 {
		slices.Sort(m.free)
		p := m.free[0]
		m.free = m.free[1:]
		return p
	}
	m.next++
	return m.next - 1
}

// find returns the engine of an address, else the one whose handshake id
// is key.
func (m *membership) find(key string) *Engine {
	if e, ok := m.byAddr[key]; ok {
		return e
	}
	for _, e := range m.byAddr {
		if id := e.Info().ID; id != "" && id == key {
			return e
		}
	}
	return nil
}

// Add connects to a new engine at addr (HOST:PORT). An address already in
// the pool is refused with ErrEngineExists, and its engine returned.
func (p *Pool) Add(addr string) (*Engine, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadAddress, addr, err)
	}
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	if p.mem.closed {
		return nil, ErrPoolClosed
	}
	if e, ok := p.mem.byAddr[addr]; ok {
		return e, fmt.Errorf("%w: %s", ErrEngineExists, addr)
	}
	ctx, stop := context.WithCancel(p.ctx)
	e := &Engine{Addr: addr, pool: p, log: p.log, pos: p.mem.takePos(), stop: stop, done: make(chan struct{})}
	e.streams.Store(newStreamTable(streamTableMin))
	p.mem.byAddr[addr] = e
	p.publishLocked()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(e.done)
		e.run(ctx)
	}()
	return e, nil
}

// Lookup returns the engine whose address, or else handshake id, is key.
func (p *Pool) Lookup(key string) (*Engine, bool) {
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	e := p.mem.find(key)
	return e, e != nil
}

// Drain stops routing to the engine whose address or id is key; once its
// streams are over it disconnects and leaves the index, and stays listed
// as drained.
func (p *Pool) Drain(key string) (*Engine, error) { return p.leave(key, false) }

// Remove drains the engine whose address or id is key and then takes it
// out of the pool.
func (p *Pool) Remove(key string) (*Engine, error) { return p.leave(key, true) }

func (p *Pool) leave(key string, forget bool) (*Engine, error) {
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	if p.mem.closed {
		return nil, ErrPoolClosed // and no goroutine may join p.wg now
	}
	e := p.mem.find(key)
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownEngine, key)
	}
	e.forget = e.forget || forget
	switch {
	case e.retired:
		if e.forget {
			p.unlistLocked(e)
		}
	case !e.retiring:
		e.retiring = true
		e.leaving.Store(true)
		p.log.Info("engine leaving: no new requests", "engine", e.Addr, "remove", forget)
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.retire(e) }()
	}
	return e, nil
}

// retire waits for the leaving engine's streams to end, then disconnects
// it and takes its slots out of the index.
func (p *Pool) retire(e *Engine) {
	deadline := time.NewTimer(p.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// Generate checks leaving under e.mu, so once OpenStreams (under e.mu)
	// says none, none can open.
	for n := e.OpenStreams(); n > 0; n = e.OpenStreams() {
		select {
		case <-p.ctx.Done():
			return
		case <-deadline.C:
			p.log.Warn("engine drain timed out: ending its streams", "engine", e.Addr, "open_streams", n,
				"drain_timeout", p.cfg.DrainTimeout.String())
			n = 0
		case <-tick.C:
		}
		if n == 0 {
			break
		}
	}
	e.stop()
	<-e.done // run has purged: nothing else writes the engine's slots now
	if _, ok := p.index.Slots(e.Addr); ok {
		if err := p.index.RemoveEngine(e.Addr); err != nil {
			p.log.Warn("removing a drained engine from the index", "engine", e.Addr, "err", err)
		}
	}
	old := e.profile()
	e.prof.Store(newProfile(old.info, old.hasher, nil, nil)) // its slots may go to another engine now
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	// Drained and retired together, under the membership lock: a Remove
	// that saw StateDrained must find the engine retired and unlist it
	// itself, not leave it to this goroutine after Remove has returned.
	e.state.Store(int32(StateDrained))
	e.retired = true
	if e.forget {
		p.unlistLocked(e)
	} else {
		p.publishLocked()
	}
	p.log.Info("engine drained: disconnected, out of the index", "engine", e.Addr, "removed", e.forget)
}

// unlistLocked takes a retired engine out of the membership.
func (p *Pool) unlistLocked(e *Engine) {
	if p.mem.byAddr[e.Addr] != e {
		return
	}
	delete(p.mem.byAddr, e.Addr)
	p.mem.free = append(p.mem.free, e.pos)
	p.publishLocked()
}

// publishLocked stores the membership for Engines, in position order, and
// wakes the Changed waiters.
func (p *Pool) publishLocked() {
	es := make([]*Engine, 0, len(p.mem.byAddr))
	for _, e := range p.mem.byAddr {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *Engine) int { return a.pos - b.pos })
	p.engines.Store(&es)
	close(p.mem.changed)
	p.mem.changed = make(chan struct{})
}

// membershipChanged wakes the Changed waiters (an engine's identity became
// known) without changing the membership.
func (p *Pool) membershipChanged() {
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	close(p.mem.changed)
	p.mem.changed = make(chan struct{})
}

// sameID returns another member whose handshake id is e's, or nil.
func (p *Pool) sameID(e *Engine) *Engine {
	id := e.Info().ID
	for _, o := range p.Engines() {
		if o != e && id != "" && o.Info().ID == id && o.State() != StateDrained {
			return o
		}
	}
	return nil
}

// Changed returns a channel closed at the next change of the membership or
// of a member's handshake id; take a new one after each.
func (p *Pool) Changed() <-chan struct{} {
	p.mem.mu.Lock()
	defer p.mem.mu.Unlock()
	return p.mem.changed
}
