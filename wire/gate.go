package wire

import (
	"container/list"
	"net"
	"sync"
	"sync/atomic"
)

// HandshakeGate bounds how many accepted connections a listener holds
// before their handshake completes. A connection enters the gate when it is
// accepted and leaves when its handshake ends, either way. When a connection
// arrives at a full gate, the one that has waited longest is closed: a flood
// of silent or half-sent HELLOs cannot lock out a peer that completes its
// handshake in a round trip, and all the flood holds at any time is Max
// connections of about a kilobyte of buffer each (MaxHandshakeFrame at
// most, for one that is really sending a HELLO), each for at most the
// handshake timeout. Closing the socket ends the blocked handshake at once,
// so what it held is garbage as soon as its goroutine returns.
//
// A HandshakeGate is safe for concurrent use.
type HandshakeGate struct {
	max int

	mu      sync.Mutex
	pending list.List // of net.Conn, oldest first

	evicted atomic.Uint64
}

// NewHandshakeGate returns a gate holding at most max pending handshakes
// (DefaultMaxHandshakes when max <= 0).
func NewHandshakeGate(max int) *HandshakeGate {
	if max <= 0 {
		max = DefaultMaxHandshakes
	}
	return &HandshakeGate{max: max}
}

// Enter registers nc as handshaking, closing the oldest pending connection
// first when the gate is full. Call the returned function when the
// handshake ends, whatever its outcome; calling it again does nothing.
func (g *HandshakeGate) Enter(nc net.Conn) (leave func()) {
	var oldest net.Conn
	g.mu.Lock()
	if g.pending.Len() >= g.max {
		oldest = g.pending.Remove(g.pending.Front()).(net.Conn)
	}
	el := g.pending.PushBack(nc)
	g.mu.Unlock()
	if oldest != nil {
		g.evicted.Add(1)
		_ = oldest.Close() // its handshake fails now and leaves
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.pending.Remove(el) // a no-op when it was evicted
			g.mu.Unlock()
		})
	}
}

// Pending returns how many connections are handshaking now.
func (g *HandshakeGate) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending.Len()
}

// Evicted counts connections closed to make room for newer ones.
func (g *HandshakeGate) Evicted() uint64 { return g.evicted.Load() }

// Max returns the gate's bound.
func (g *HandshakeGate) Max() int { return g.max }
