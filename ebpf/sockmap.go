package ebpf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	cebpf "github.com/cilium/ebpf"
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

// sockmapPair is a pair in the socket hash.
type sockmapPair struct {
	s                  *sockmap
	up, client         *net.TCPConn
	upCookie, clCookie uint64
	ctl                [ctlSize]byte
	released           bool
	// recvBase is what TCP had received on up when it entered the hash:
	// the program counts from there.
	recvBase uint64
}

// Prepare puts both sockets in the socket hash, the upstream with steering
// off: until Steer, every byte of the response passes to user space.
func (s *sockmap) Prepare(up, client *net.TCPConn) (Pair, error) {
	p := &sockmapPair{s: s, up: up, client: client}
	var upFD, clFD int
	var err error
	if p.upCookie, upFD, err = cookieOf(up); err != nil {
		return nil, err
	}
	if p.clCookie, clFD, err = cookieOf(client); err != nil {
		return nil, err
	}
	binary.NativeEndian.PutUint64(p.ctl[ctlClient:], p.clCookie)
	err = s.use(func(o *objects) error {
		if err := o.ctl.Update(p.upCookie, p.ctl[:], cebpf.UpdateNoExist); err != nil {
			return fmt.Errorf("ebpf: control entry: %w", err)
		}
		if err := o.stat.Update(p.upCookie, make([]byte, statSize), cebpf.UpdateNoExist); err != nil {
			return fmt.Errorf("ebpf: counter entry: %w", err)
		}
		// The client first: the upstream's bytes may be redirected to it
		// as soon as steering is on.
		if err := o.clients.Update(p.clCookie, uint64(clFD), cebpf.UpdateAny); err != nil {
			return fmt.Errorf("ebpf: client socket into the hash: %w", err)
		}
		if err := o.socks.Update(p.upCookie, uint64(upFD), cebpf.UpdateNoExist); err != nil {
			return fmt.Errorf("ebpf: upstream socket into the hash: %w", err)
		}
		return nil
	})
	if err == nil {
		p.recvBase, err = bytesReceived(up)
	}
	if err != nil {
		_ = p.forget()
		return nil, err
	}
	return p, nil
}

func (p *sockmapPair) Read(b []byte) (int, error) { return p.up.Read(b) }

// setCtl writes the control entry: bytes consumed, the length, credit.
func (p *sockmapPair) setCtl(consumed, limit, credit uint64) error {
	binary.NativeEndian.PutUint64(p.ctl[ctlEnabled:], 1)
	binary.NativeEndian.PutUint64(p.ctl[ctlConsumed:], consumed)
	binary.NativeEndian.PutUint64(p.ctl[ctlLimit:], limit)
	binary.NativeEndian.PutUint64(p.ctl[ctlCredit:], credit)
	return p.s.use(func(o *objects) error { return o.ctl.Update(p.upCookie, p.ctl[:], cebpf.UpdateExist) })
}

func (p *sockmapPair) stat() (passed, total uint64, err error) {
	var v [statSize]byte
	if err := p.s.use(func(o *objects) error { return o.stat.Lookup(p.upCookie, v[:]) }); err != nil {
		return 0, 0, err
	}
	passed = binary.NativeEndian.Uint64(v[statPassed:])
	return passed, passed + binary.NativeEndian.Uint64(v[statRedirected:]), nil
}

// Steer turns steering on and relays in user space only what the program
// passed: what arrived before user space caught up, and what went past the
// client's credit. It returns when the program has counted total bytes, or
// the upstream closed, and every redirected byte has entered the client's
// socket.
func (p *sockmapPair) Steer(ctx context.Context, read, total int64) (int64, error) {
	limit := uint64(0)
	if total >= 0 {
		limit = uint64(total)
	}
	si, err := readSock(p.client)
	if err != nil {
		return 0, err
	}
	base, ackedBase := si.entered(), si.acked
	// credit lets the program run MaxClientQueue bytes past what the client
	// has acknowledged of this response; it also checks the client is there.
	credit := func() (uint64, error) {
		si, err := readSock(p.client)
		if err == nil {
			err = si.alive()
		}
		return uint64(read) + (si.acked - ackedBase) + MaxClientQueue, err
	}
	p.s.mu.Lock()
	p.s.waiting[p.upCookie] = p
	p.s.mu.Unlock()
	defer func() {
		p.s.mu.Lock()
		delete(p.s.waiting, p.upCookie)
		p.s.mu.Unlock()
		_ = p.up.SetReadDeadline(time.Time{})
	}()
	consumed := uint64(read)
	c, err := credit()
	if err == nil {
		err = p.setCtl(consumed, limit, c)
	}
	if err != nil {
		return 0, err
	}
	var written uint64 // bytes user space wrote to the client after base
	var checked uint64 // written at the last integrity check
	buf := make([]byte, 64<<10)
	for {
		passed, seen, err := p.stat()
		if err != nil {
			return 0, err
		}
		if limit > 0 && seen >= limit && passed == consumed {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_ = p.up.SetReadDeadline(time.Now().Add(checkEvery))
		n, rerr := p.up.Read(buf)
		var counted uint64 // the program's count once these bytes were read
		if n > 0 {
			// Passed bytes follow every byte redirected so far: wait until
			// those have entered the client's socket before writing these.
			var redirected uint64
			if counted, redirected, err = p.waitRedirected(ctx, base, written); err != nil {
				return 0, err
			}
			// Nothing is redirected while user space holds passed bytes,
			// so this write completes a response with a length exactly
			// when it reaches that length: the client must not get it if
			// a segment came twice.
			if limit > 0 && consumed+uint64(n)+redirected >= limit {
				if err := p.intactAtEnd(counted, limit); err != nil {
					return 0, p.cut(err)
				}
			}
			if _, err := p.client.Write(buf[:n]); err != nil {
				return 0, err
			}
			consumed += uint64(n)
			written += uint64(n)
			p.s.relayed.Add(uint64(n))
		}
		if c, err = credit(); err == nil {
			err = p.setCtl(consumed, limit, c)
		}
		if err != nil {
			return 0, err
		}
		// A check now and then ends a duplicated response early. It comes
		// after the control entry is renewed, so it does not hold
		// redirecting back.
		if n > 0 && written-checked >= checkSpan {
			checked = written
			if err := p.intact(counted); err != nil {
				return 0, p.cut(err)
			}
		}
		if rerr != nil {
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(rerr, net.ErrClosed) || isEOF(rerr) {
				if limit > 0 {
					if _, seen, _ := p.stat(); seen < limit {
						return 0, ErrTruncated
					}
				}
				break
			}
			return 0, rerr
		}
	}
	seen, _, err := p.waitRedirected(ctx, base, written)
	if err != nil {
		return 0, err
	}
	if err := p.intact(seen); err != nil {
		return 0, p.cut(err)
	}
	return int64(seen) - read, nil
}

// waitRedirected waits until every byte the program redirected has entered
// the client's socket (it may still sit in the kernel's redirect backlog):
// the bytes that entered since base, less user space's own writes, cover
// the redirected ones. It returns the program's count of bytes and of
// redirected bytes as it last read them.
func (p *sockmapPair) waitRedirected(ctx context.Context, base, written uint64) (seen, redirected uint64, err error) {
	for {
		passed, seen, err := p.stat()
		if err != nil {
			return 0, 0, err
		}
		redirected := seen - passed
		si, err := readSock(p.client)
		if err != nil {
			return 0, 0, err
		}
		if si.entered()-base >= written+redirected {
			return seen, redirected, nil
		}
		if err := si.alive(); err != nil {
			return 0, 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// ErrDuplicated: the kernel ran the verdict program twice on some of the
// upstream's bytes, so they would reach the client twice. Seen on Linux
// 6.18 under a client that stops reading: one whole segment is passed to
// user space a second time (perf/RESULTS.md). The response is abandoned
// before the client has all of it, and the client's connection resets
// when the caller closes it.
var ErrDuplicated = errors.New("ebpf: the kernel delivered response bytes twice; response abandoned")

// checkSpan is how many bytes Steer writes between integrity checks in
// the middle of a response.
const checkSpan = 1 << 20

// cut returns err, first making the client's connection reset when it is
// closed if err is ErrDuplicated: the client of a response the upstream's
// close ends could not tell a plain close from the end, and one of a
// response with a length may be only a segment short.
func (p *sockmapPair) cut(err error) error {
	if errors.Is(err, ErrDuplicated) {
		_ = p.client.SetLinger(0)
	}
	return err
}

// intactAtEnd is intact for the write that completes a response of limit
// bytes, with no way round it: if the rest of the upstream's bytes arrive
// between the two reads intact makes, the program has by then counted
// past limit, which TCP alone cannot have received.
func (p *sockmapPair) intactAtEnd(counted, limit uint64) error {
	if err := p.intact(counted); err != nil {
		return err
	}
	_, seen, err := p.stat()
	if err != nil {
		return err
	}
	if seen > limit {
		return p.intact(seen) // past the length: a duplicate, unless the upstream sent more
	}
	return nil
}

// intact returns ErrDuplicated when seen, the program's count read just
// before, is more than TCP has received on the upstream socket since it
// entered the hash. The count is read first and TCP second, so every byte
// counted had been received when TCP is asked: a whole stream never fails
// the check. A duplicate shows unless a segment's worth arrived between
// the two reads, and always once the upstream's last byte has arrived.
func (p *sockmapPair) intact(seen uint64) error {
	recv, err := bytesReceived(p.up)
	if err != nil {
		return err
	}
	if seen > recv-p.recvBase {
		return ErrDuplicated
	}
	return nil
}

// Release takes both sockets out of the hash and forgets the pair.
func (p *sockmapPair) Release() error {
	if p.released {
		return nil
	}
	p.released = true
	return p.forget()
}

func (p *sockmapPair) forget() error {
	err := p.s.use(func(o *objects) error {
		var errs []error
		for _, err := range []error{o.socks.Delete(p.upCookie), o.clients.Delete(p.clCookie),
			o.ctl.Delete(p.upCookie), o.stat.Delete(p.upCookie)} {
			if err != nil && !errors.Is(err, cebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
	if errors.Is(err, ErrClosed) {
		return nil // the maps are gone, and the sockets with them
	}
	return err
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
