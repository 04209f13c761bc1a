// Package floor is the least a router on kvgate's stack can do per
// request: an HTTP/1.1 server on gnet that forwards each request as one
// small frame over a netpoll connection to an in-process upstream (Go's
// net, as the simulated engines use) and answers the client with a fixed
// body when the upstream's reply frame comes back. It parses, tokenizes,
// routes, detokenizes and encodes nothing.
//
// Set beside nginx (perf/scripts/floorratio.sh), it bounds what kvgate's
// request path can reach on a machine with the libraries of the design
// card: the syscalls and goroutine hand-offs are kvgate's, the work
// between them is not. Two modes tell the hand-offs apart:
//
//   - ModeLoop runs a request to completion with no goroutine of its own:
//     the event loop writes the frame, the upstream connection's read
//     loop writes the answer to the client's socket.
//   - ModeWorker hands each request to a pooled handler goroutine that
//     writes the frame and waits for its reply, as kvgate's gateway does
//     (httpx's workers, engine streams).
//
// It is a measuring instrument, not a server: no timeouts, no limits
// beyond a request's size, and pipelined requests are refused.
package floor

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cloudwego/netpoll"
	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"

	"github.com/kvgate/kvgate/dataplane/httpx"
)

// Mode is how a request's work is placed on goroutines.
type Mode string

// The modes.
const (
	ModeLoop   Mode = "loop"
	ModeWorker Mode = "worker"
)

// Config is a floor proxy's setup.
type Config struct {
	Addr      string // the HTTP listener
	Mode      Mode
	Upstreams int // connections to the in-process upstream (each its own read loop)
	Loops     int // gnet event loops (0: one per CPU)
	Body      []byte
	Logger    *slog.Logger // gnet's lines go here (nil: discarded)
}

// maxRequest bounds a request's header plus body.
const maxRequest = 64 << 10

// frameSize is the request and reply frame: a request id and padding, the
// size of a small GENERATE's fixed part and of a one-token TOKENS frame.
const frameSize = 32

// Proxy is a running floor proxy.
type Proxy struct {
	gnet.BuiltinEventEngine
	cfg    Config
	answer []byte
	ups    []*upstream
	next   atomic.Uint32
	slots  sync.Map // request id -> *pending
	ids    atomic.Uint64
	work   chan *pending // ModeWorker: requests for the handler goroutines
	srv    net.Listener
	eng    gnet.Engine
	booted chan struct{}
}

// client is one HTTP connection; mu orders writes to its socket from the
// read loops with OnClose (a closed socket is never written).
type client struct {
	c      gnet.Conn
	fd     int
	mu     sync.Mutex
	closed bool
	busy   atomic.Bool // a request in service
}

// pending is one request between its frame and its reply.
type pending struct {
	cl    *client
	id    uint64
	reply chan struct{} // ModeWorker: the reply came
}

// upstream is one netpoll connection to the upstream server.
type upstream struct {
	mu sync.Mutex // orders frame writes
	c  netpoll.Connection
}

// New starts the upstream server and connects to it; Serve runs the proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Mode != ModeLoop && cfg.Mode != ModeWorker {
		return nil, fmt.Errorf("floor: mode %q: want %q or %q", cfg.Mode, ModeLoop, ModeWorker)
	}
	if cfg.Upstreams <= 0 {
		cfg.Upstreams = 4
	}
	p := &Proxy{cfg: cfg, booted: make(chan struct{}), work: make(chan *pending, 1024)}
	p.answer = append([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
		strconv.Itoa(len(cfg.Body))+"\r\n\r\n"), cfg.Body...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = ln
	go serveUpstream(ln)
	for range cfg.Upstreams {
		c, err := netpoll.DialConnection("tcp", ln.Addr().String(), 0)
		if err != nil {
			p.Close()
			return nil, err
		}
		u := &upstream{c: c}
		p.ups = append(p.ups, u)
		go p.readLoop(u)
	}
	return p, nil
}

// Serve runs the HTTP listener until Close.
func (p *Proxy) Serve() error {
	log := p.cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithReuseAddr(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(httpx.GnetLogger(log)), gnet.WithLogLevel(logging.WarnLevel)}
	if p.cfg.Loops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(p.cfg.Loops))
	}
	return gnet.Run(p, "tcp://"+p.cfg.Addr, opts...)
}

// Booted is closed once the listener accepts connections.
func (p *Proxy) Booted() <-chan struct{} { return p.booted }

// Close stops the upstream; a Serve that runs stops with the process.
func (p *Proxy) Close() {
	for _, u := range p.ups {
		_ = u.c.Close()
	}
	_ = p.srv.Close()
	close(p.work)
}

// OnBoot implements gnet.EventHandler.
func (p *Proxy) OnBoot(eng gnet.Engine) gnet.Action {
	p.eng = eng
	close(p.booted)
	return gnet.None
}

// OnOpen implements gnet.EventHandler.
func (p *Proxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&client{c: c, fd: c.Fd()})
	return nil, gnet.None
}

// OnClose implements gnet.EventHandler.
func (p *Proxy) OnClose(c gnet.Conn, _ error) gnet.Action {
	cl := c.Context().(*client)
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	return gnet.None
}

// OnTraffic implements gnet.EventHandler: each whole request goes on.
func (p *Proxy) OnTraffic(c gnet.Conn) gnet.Action {
	cl := c.Context().(*client)
	buf, _ := c.Peek(-1)
	n, err := requestLen(buf)
	switch {
	case err != nil:
		return gnet.Close
	case n == 0:
		return gnet.None // the rest is on its way
	case n < len(buf) || !cl.busy.CompareAndSwap(false, true):
		return gnet.Close // pipelined
	}
	_, _ = c.Discard(n)
	r := &pending{cl: cl, id: p.ids.Add(1)}
	if p.cfg.Mode == ModeWorker {
		r.reply = make(chan struct{}, 1)
		p.work <- r
		return gnet.None
	}
	p.slots.Store(r.id, r)
	if p.send(r.id) != nil {
		return gnet.Close
	}
	return gnet.None
}

// Handle runs n handler goroutines for ModeWorker until Close.
func (p *Proxy) Handle(n int) {
	for range n {
		go func() {
			for r := range p.work {
				p.slots.Store(r.id, r)
				if p.send(r.id) != nil {
					_ = r.cl.c.Close()
					continue
				}
				<-r.reply
				p.answerClient(r.cl)
			}
		}()
	}
}

// send writes request id's frame to the next upstream.
func (p *Proxy) send(id uint64) error {
	u := p.ups[p.next.Add(1)%uint32(len(p.ups))]
	u.mu.Lock()
	defer u.mu.Unlock()
	w := u.c.Writer()
	b, err := w.Malloc(frameSize)
	if err != nil {
		return err
	}
	putID(b, id)
	return w.Flush()
}

// readLoop takes the upstream's replies and finishes their requests.
func (p *Proxy) readLoop(u *upstream) {
	r := u.c.Reader()
	for {
		b, err := r.Next(frameSize)
		if err != nil {
			return
		}
		id := getID(b)
		_ = r.Release()
		v, ok := p.slots.LoadAndDelete(id)
		if !ok {
			continue
		}
		req := v.(*pending)
		if p.cfg.Mode == ModeWorker {
			req.reply <- struct{}{}
			continue
		}
		p.answerClient(req.cl)
	}
}

// answerClient writes the fixed answer to cl's socket; a socket that
// would not take it all is closed (the answer is far below a socket
// buffer: it happens only to a client that stopped reading).
func (p *Proxy) answerClient(cl *client) {
	cl.busy.Store(false)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed {
		return
	}
	if n, err := syscall.Write(cl.fd, p.answer); err != nil || n < len(p.answer) {
		_ = cl.c.CloseWithCallback(nil)
	}
}

// requestLen is the length of the whole request at the start of b, 0 if
// it is not all there yet.
func requestLen(b []byte) (int, error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > maxRequest {
			return 0, errors.New("floor: header too large")
		}
		return 0, nil
	}
	head := b[:end]
	body := 0
	for line := range bytes.SplitSeq(head, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 || n > maxRequest {
				return 0, errors.New("floor: bad Content-Length")
			}
			body = n
		}
	}
	if n := end + 4 + body; len(b) >= n {
		return n, nil
	}
	return 0, nil
}

func putID(b []byte, id uint64) {
	for i := range 8 {
		b[i] = byte(id >> (8 * i))
	}
	clear(b[8:frameSize])
}

func getID(b []byte) uint64 {
	var id uint64
	for i := range 8 {
		id |= uint64(b[i]) << (8 * i)
	}
	return id
}

// serveUpstream answers every frame of every connection with a frame of
// the same id, the replies to what one read brought in one write.
func serveUpstream(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			in := make([]byte, 64<<10)
			out := make([]byte, 0, 64<<10)
			held := 0
			for {
				n, err := c.Read(in[held:])
				if err != nil {
					return
				}
				held += n
				whole := held - held%frameSize
				out = append(out[:0], in[:whole]...) // a reply is its request's frame back
				held = copy(in, in[whole:held])
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	}
}
