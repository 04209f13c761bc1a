package ebpf

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

var aLongTimeAgo = time.Unix(1, 0)

// MaxClientQueue bounds how far the kernel may run ahead of what a client
// has acknowledged while its response is steered. The redirect queue in
// the kernel has no bound of its own (the upstream's receive window stays
// open), so user space grants credit: the program redirects only while the
// response's bytes stay within MaxClientQueue of the client's
// acknowledgements, and passes the rest to user space, which relays it
// with ordinary TCP back-pressure.
const MaxClientQueue = 16 << 20

// checkEvery is how often a steered pair renews the client's credit and
// looks at the client's state and its context.
const checkEvery = 2 * time.Millisecond

// sockmap is the in-kernel steerer.
type sockmap struct {
	// life guards the maps against Close: pairs use them under RLock and
	// find dead set once Close has taken them away.
	life    sync.RWMutex
	dead    bool
	o       *objects
	relayed atomic.Uint64 // bytes relayed in user space (passed, not redirected)
	mu      sync.Mutex
	waiting map[uint64]*sockmapPair // by upstream cookie: who to wake on "done"
}

// NewSockmap loads the verdict program and its maps.
func NewSockmap() (Steerer, error) {
	o, err := load()
	if err != nil {
		return nil, err
	}
	s := &sockmap{o: o, waiting: map[uint64]*sockmapPair{}}
	go s.dispatch()
	return s, nil
}

// ErrClosed: the steerer was closed while a pair still used it.
var ErrClosed = errors.New("ebpf: steerer closed")

// use runs f on the maps unless the steerer is closed.
func (s *sockmap) use(f func(o *objects) error) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.dead {
		return ErrClosed
	}
	return f(s.o)
}

func (s *sockmap) Mode() Mode { return ModeSockmap }

// Close unloads the program and its maps; pairs still relaying fail with
// ErrClosed (the kernel drops the sockets from the maps as they go).
func (s *sockmap) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	if !s.dead {
		s.dead = true
		s.o.close() // closes the ring buffer reader too: dispatch returns
	}
	return nil
}

// dispatch wakes the pair whose response the program saw end.
func (s *sockmap) dispatch() {
	for {
		rec, err := s.o.events.Read()
		if err != nil {
			return
		}
		if len(rec.RawSample) < 8 {
			continue
		}
		cookie := binary.NativeEndian.Uint64(rec.RawSample)
		s.mu.Lock()
		p := s.waiting[cookie]
		s.mu.Unlock()
		if p != nil {
			_ = p.up.SetReadDeadline(aLongTimeAgo) // wakes its loop
		}
	}
}
