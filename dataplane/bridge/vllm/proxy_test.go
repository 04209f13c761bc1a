package vllm_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// tcpProxy forwards loopback connections to a target so a test can cut
// them (the kernel sees both ends closed, as when a middlebox or a peer
// drops a connection) and refuse new ones for a while, without root.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// startProxy listens on a random loopback port; Close runs at cleanup.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's tcp:// endpoint.
func (p *tcpProxy) URL() string { return "tcp://" + p.ln.Addr().String() }

func (p *tcpProxy) accept() {
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
func (p *tcpProxy) forward(c net.Conn) {
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

func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut closes every forwarded connection; paused says whether new ones are
// refused until Resume.
func (p *tcpProxy) Cut(paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = paused
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Resume forwards new connections again.
func (p *tcpProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
}

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.Cut(true)
	p.wg.Wait()
}
