package syncring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// linkQueue bounds the messages waiting for one peer's connection. A peer
// that lets it fill is too slow for the ring and its link is dropped.
const linkQueue = 1024

// link is this replica's outbound connection to one peer. Every replica
// dials every other, sends only on the connections it dialed and receives
// only on those it accepted, so each direction is one ordered TCP stream
// and the delta state of each end is simple. The ring loop encodes and
// enqueues; the link's own goroutine writes, so a slow peer never blocks
// the loop.
type link struct {
	id, addr string
	conn     *wire.Conn
	q        chan []byte
	closed   chan struct{}
	once     atomic.Bool
	send     deltaState // owned by the ring loop
	timeout  time.Duration
}

func newLink(id, addr string, c *wire.Conn, timeout time.Duration) *link {
	return &link{id: id, addr: addr, conn: c, q: make(chan []byte, linkQueue), closed: make(chan struct{}), timeout: timeout}
}

// enqueue hands body to the writer without blocking; false means the queue
// is full or the link closed.
func (l *link) enqueue(body []byte) bool {
	select {
	case <-l.closed:
		return false
	default:
	}
	select {
	case l.q <- body:
		return true
	default:
		return false
	}
}

// close ends the link; run returns and the dialer reconnects.
func (l *link) close() {
	if l.once.CompareAndSwap(false, true) {
		close(l.closed)
		if l.conn != nil { // nil only in tests that drive the loop by hand
			_ = l.conn.Close()
		}
	}
}

// run writes queued bodies, batching what is waiting into one write, until
// the link closes or a write fails or takes longer than the timeout.
func (l *link) run() error {
	defer l.close()
	for {
		select {
		case <-l.closed:
			return nil
		case b := <-l.q:
			if err := l.conn.Queue(0, &wire.Ring{Body: b}); err != nil {
				return err
			}
		drain:
			for {
				select {
				case b := <-l.q:
					if err := l.conn.Queue(0, &wire.Ring{Body: b}); err != nil {
						return err
					}
				default:
					break drain
				}
			}
			_ = l.conn.NetConn.SetWriteDeadline(time.Now().Add(l.timeout))
			if err := l.conn.Flush(); err != nil {
				return err
			}
		}
	}
}

// handshake is what a replica says of itself and demands of a peer.
func (r *Ring) handshake() *wire.HandshakeConfig {
	return &wire.HandshakeConfig{
		Local:  wire.Handshake{Role: wire.RolePeer, ID: r.cfg.ID, Features: r.features()},
		Secret: r.cfg.Secret,
		Check: func(p *wire.Handshake) error {
			if p.Role != wire.RolePeer {
				return &wire.CheckError{Code: wire.CodeProtocol, Err: fmt.Errorf("peer %q is not a kvgate replica (role %d)", p.ID, p.Role)}
			}
			if p.ID == "" {
				return &wire.CheckError{Code: wire.CodeProtocol, Err: errors.New("replica without an id")}
			}
			if p.Features&wire.FeatureRingByKey == 0 {
				return &wire.CheckError{Code: wire.CodeVersion, Err: fmt.Errorf("replica %q speaks ring format 1 (engines by position); this one speaks 2 (engines by key): run one version in a ring", p.ID)}
			}
			return nil
		},
	}
}

func (r *Ring) features() wire.Feature {
	switch r.cfg.Codec {
	case wire.CodecS2:
		return wire.FeatureRingByKey | wire.FeatureS2
	case wire.CodecZstd:
		return wire.FeatureRingByKey | wire.FeatureZstd
	}
	return wire.FeatureRingByKey
}

// codecFeatures are the compression bits of features.
const codecFeatures = wire.FeatureS2 | wire.FeatureZstd

// dialLoop keeps an outbound link to addr until ctx ends or addr turns out
// to be this replica itself.
func (r *Ring) dialLoop(ctx context.Context, addr string) {
	backoff := 20 * time.Millisecond
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, r.cfg.DeadAfter)
		c, err := wire.Dial(dctx, addr, r.handshake(), nil)
		cancel()
		if err == nil {
			if c.Peer.ID == r.cfg.ID {
				_ = c.Close()
				r.log.Debug("ring: peer address is this replica", "addr", addr)
				return
			}
			if r.cfg.Codec != wire.CodecNone && c.Peer.Features&r.features()&codecFeatures != 0 {
				c.SetCodec(r.cfg.Codec)
			}
			l := newLink(c.Peer.ID, addr, c, r.cfg.DeadAfter)
			if !r.post(ctx, linkUp{l}) {
				l.close()
				return
			}
			stop := context.AfterFunc(ctx, l.close) // the address left DNS, or the ring closes
			err = l.run()
			stop()
			r.post(r.root, linkDown{l}) // even when ctx ended: the loop must forget the link
			backoff = 20 * time.Millisecond
		}
		if err != nil && ctx.Err() == nil {
			r.log.Debug("ring: link to peer", "addr", addr, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff + rand.N(backoff)):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// acceptLoop serves inbound peer connections.
func (r *Ring) acceptLoop(ctx context.Context, ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("ring: accept", "err", err)
			}
			return
		}
		leave := r.gate.Enter(nc) // here, in accept order: the gate closes the oldest
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.serveInbound(ctx, nc, leave) }()
	}
}

// serveInbound authenticates a peer and feeds its messages to the ring
// loop; leave takes it out of the handshake gate once authenticated or
// refused. It is the only reader of the connection and keeps the receiving
// delta state. Any malformed frame or message ends the connection.
func (r *Ring) serveInbound(ctx context.Context, nc net.Conn, leave func()) {
	r.track(nc, true)
	defer r.track(nc, false)
	defer nc.Close()
	hctx, cancel := context.WithTimeout(ctx, r.cfg.HandshakeTimeout)
	c, err := wire.Server(hctx, nc, r.handshake(), nil)
	cancel()
	leave()
	if err != nil {
		r.metrics.refused.Add(1)
		r.log.Debug("ring: refused peer", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	from := c.Peer.ID
	if from == r.cfg.ID {
		return // this replica dialing its own address
	}
	var recv deltaState
	for ctx.Err() == nil {
		_ = nc.SetReadDeadline(time.Now().Add(r.cfg.DeadAfter))
		f, err := c.ReadFrame()
		if err != nil {
			if ctx.Err() == nil {
				r.log.Debug("ring: inbound link ended", "peer", from, "err", err)
			}
			return
		}
		switch f.Type {
		case wire.TypeRing:
		case wire.TypePing:
			continue
		default:
			_ = c.SendError(0, wire.CodeProtocol, f.Type.String()+" on a ring connection")
			return
		}
		m := &message{}
		err = decodeMessage(f.Payload, m, func(ch *chunk, n int) []int64 {
			return recv.base(deltaKey{phase: ch.Phase, index: ch.Index}, n)
		})
		if err != nil {
			_ = c.SendError(0, wire.CodeProtocol, err.Error())
			r.log.Warn("ring: malformed message", "peer", from, "err", err)
			return
		}
		if m.Kind == kindChunk {
			recv.remember(deltaKey{phase: m.Chunk.Phase, index: m.Chunk.Index}, m.Chunk.Values)
		}
		r.metrics.bytesIn.Add(uint64(len(f.Payload) + wire.HeaderSize))
		if !r.post(ctx, inbound{from: from, msg: m}) {
			return
		}
	}
}

// track records open inbound connections so Close can end them.
func (r *Ring) track(nc net.Conn, open bool) {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if open {
		r.conns[nc] = struct{}{}
	} else {
		delete(r.conns, nc)
	}
}
