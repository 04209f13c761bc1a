package syncring

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy forwards TCP connections to a target and can delay, black-hole or
// cut them, to play a bad network between replicas.
type proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // per forwarded read, ns
	hole   atomic.Bool  // read and discard instead of forwarding
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if d := p.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d)) // not synchronisation: the slow network this proxy plays
		}
		if p.hole.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// cut closes every connection through the proxy (new ones still pass).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestBadNetwork: replicas reach r02 only through a proxy that cuts,
// delays and black-holes its traffic. Nothing deadlocks: the others re-form
// without it and converge, and all converge again when the network heals.
func TestBadNetwork(t *testing.T) {
	lns := make([]net.Listener, 3)
	var real []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], real = ln, append(real, ln.Addr().String())
	}
	px := newProxy(t, real[2])
	peers := []string{real[0], real[1], px.addr()}
	rs := make([]*replica, 3)
	for i := range rs {
		rs[i] = &replica{id: string(rune('a' + i)), addr: real[i], src: &source{loads: loadsFor(i)}}
		rs[i].start(t, peers, lns[i], nil)
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.ring.Close()
		}
	})
	converged(t, rs, "3 replicas through the proxy")

	px.cut()
	converged(t, rs, "after connections through the proxy were cut")

	px.delay.Store(int64(20 * time.Millisecond))
	rs[1].src.set(loadsFor(5))
	converged(t, rs, "with 20 ms added to every read through the proxy")
	px.delay.Store(0)

	// A one-way partition: c no longer hears a and b (their traffic to it
	// vanishes) but they still hear c. The ring must form without c on
	// both sides rather than stall every round.
	px.hole.Store(true)
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		a, b, c := len(rs[0].ring.Stats().Members), len(rs[1].ring.Stats().Members), len(rs[2].ring.Stats().Members)
		if a != 2 || b != 2 || c != 1 {
			return fmt.Errorf("a and b have not re-formed without c: members a %d, b %d, c %d", a, b, c)
		}
		return nil
	})
	rs[0].src.set(loadsFor(7))
	want := sumOf(rs[:2])
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if !rs[0].agrees(want) || !rs[1].agrees(want) {
			return errors.New("a and b do not agree without c")
		}
		return nil
	})

	px.hole.Store(false)
	px.cut() // TCP would have timed the black-holed connections out: start them afresh
	converged(t, rs, "after the partition healed")
}
