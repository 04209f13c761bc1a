package vllmtest

import (
	"net"
	"strings"
	"sync"
)

// Proxy forwards loopback TCP connections to a target so a test can cut
// them (both ends closed, as when a peer or a middlebox drops a
// connection) and refuse new ones for a while, without root (ss -K needs
// it). Put it in front of a fake's PUB socket to cut a subscriber off.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	conns  map[net.Conn]struct{}
	frozen map[net.Conn]struct{} // what they send is dropped
	wg     sync.WaitGroup
}

// StartProxy forwards a random loopback port to target (host:port, or a
// tcp:// endpoint) until Close.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(target, "tcp://"), conns: map[net.Conn]struct{}{}, frozen: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL is the proxy's tcp:// endpoint.
func (p *Proxy) URL() string { return "tcp://" + p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.forward(c)
	}
}

// forward pipes c to a new connection to the target; under p.mu, so a Cut
// never misses a connection half set up.
func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		_ = c.Close() // the dialler's handshake sees EOF
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.wg.Add(2)
	go p.pipe(c, up)
	go p.pipe(up, c)
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			_, frozen := p.frozen[src]
			p.mu.Unlock()
			if !frozen {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

// Freeze stops forwarding on the connections open now, leaving them open:
// what either side sends is dropped, as on a path that died without a FIN
// or RST. New connections are forwarded.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.frozen[c] = struct{}{}
	}
}

// Cut closes every forwarded connection; paused says whether new ones are
// refused until Resume.
func (p *Proxy) Cut(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
	clear(p.frozen)
}

// Resume forwards new connections again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
}

// Close stops the proxy and cuts its connections; it returns once its
// goroutines have.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.Cut(true)
	p.wg.Wait()
}
