package engine

import (
	"net"

	"github.com/kvgate/kvgate/wire"
)

// delivery is the read loop's side of handing TOKENS frames to streams,
// owned by the session goroutine (which runs the read loop). It keeps what
// a frame needs off the shared state:
//
//   - live caches the stream table for the frames of open streams, so a
//     plain frame (neither first nor last) takes no Engine.mu: a stream is
//     looked up under the lock on its first frame (or after a miss) and on
//     its last, which removes it from both. An entry whose stream has been
//     closed (Stream.closed: abandon, a GENERATE that failed to send) is
//     looked up again, under the lock, as before.
//   - wakes are the streams that have new events since the read loop last
//     read from the socket. Their consumers are woken together (flush)
//     just before the next read, which may wait, before any frame other
//     than TOKENS (handling it may wait too), and when the loop ends:
//     the frames of one read reach their streams with one wake each, and a
//     consumer does not race the read loop for its queue while the loop is
//     still feeding it.
type delivery struct {
	e     *Engine
	live  map[uint32]*Stream
	wakes []*Stream
}

func newDelivery(e *Engine) *delivery {
	return &delivery{e: e, live: make(map[uint32]*Stream)}
}

// tokens queues a TOKENS frame on its stream, if the stream takes it.
func (d *delivery) tokens(id uint32, m *wire.TokensMsg) {
	s := d.stream(id, m.Last())
	if s == nil {
		return
	}
	if m.First() {
		s.started.Store(true)
	}
	s.frames.Add(1)
	s.pushFrame(m)
	if !s.wakeQueued {
		s.wakeQueued = true
		d.wakes = append(d.wakes, s)
	}
}

// stream is Engine.open through the cache: a plain frame of a cached, open
// stream takes no lock.
func (d *delivery) stream(id uint32, last bool) *Stream {
	if s := d.live[id]; s != nil {
		if !last && !s.closed.Load() {
			return s
		}
		delete(d.live, id)
	}
	s := d.e.open(id, last)
	if s != nil && !last {
		d.live[id] = s
	}
	return s
}

// flush wakes the consumers of the streams fed since the last flush.
func (d *delivery) flush() {
	for i, s := range d.wakes {
		s.wakeQueued = false
		s.signal()
		d.wakes[i] = nil
	}
	d.wakes = d.wakes[:0]
}

// flushingConn is the engine's connection as its wire.Conn reads it: each
// read from the socket first flushes the delivery's wakes.
type flushingConn struct {
	net.Conn
	d *delivery
}

// Read implements io.Reader.
func (c *flushingConn) Read(p []byte) (int, error) {
	c.d.flush()
	return c.Conn.Read(p)
}
