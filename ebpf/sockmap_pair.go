package ebpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	cebpf "github.com/cilium/ebpf"
)

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
