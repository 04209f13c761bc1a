package serve

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Tokens is one TOKENS frame for one request.
type Tokens struct {
	Key Key
	Msg wire.TokensMsg
}

// Deliver sends TOKENS frames, one write per connection. A frame with
// TokLast closes its stream; frames for closed streams or gone routers are
// dropped (the request was cancelled).
func (s *Server) Deliver(batch []Tokens) { s.Publish(nil, batch) }

// Publish sends events on stream 0 of every router, then batch's TOKENS
// frames as Deliver does, each connection's frames in one write.
func (s *Server) Publish(events []wire.Message, batch []Tokens) {
	var buf [8]*conn
	touched := buf[:0] // the connections to flush: few, so a list
	if len(events) > 0 {
		for _, c := range s.connList() {
			for _, m := range events {
				_ = c.wc.Queue(0, m)
			}
			touched = append(touched, c)
		}
	}
	var c *conn
	for i := range batch {
		t := &batch[i]
		if c == nil || c.id != t.Key.Conn {
			if c = s.conn(t.Key.Conn); c == nil {
				continue
			}
		}
		c.mu.Lock()
		_, open := c.streams[t.Key.Stream]
		if open && t.Msg.Flags&wire.TokLast != 0 {
			delete(c.streams, t.Key.Stream)
		}
		c.mu.Unlock()
		if open && c.wc.Queue(t.Key.Stream, &t.Msg) == nil && !slices.Contains(touched, c) {
			touched = append(touched, c)
		}
	}
	for _, c := range touched {
		_ = c.wc.Flush()
	}
}

// Fail ends a request with a stream ERROR (the engine failed it mid-way).
func (s *Server) Fail(k Key, code wire.ErrorCode, msg string) {
	c := s.conn(k.Conn)
	if c == nil {
		return
	}
	c.mu.Lock()
	_, open := c.streams[k.Stream]
	delete(c.streams, k.Stream)
	c.mu.Unlock()
	if open {
		_ = c.wc.SendError(k.Stream, code, msg)
	}
}

// SendTo sends frames on stream 0 of one connection (snapshots), in one
// write. It fails when the router is gone.
func (s *Server) SendTo(connID uint64, ms ...wire.Message) error {
	c := s.conn(connID)
	if c == nil {
		return errors.New("serve: router gone")
	}
	for _, m := range ms {
		if err := c.wc.Queue(0, m); err != nil {
			return err
		}
	}
	return c.wc.Flush()
}

// Broadcast sends m on stream 0 of every router connection.
func (s *Server) Broadcast(m wire.Message) {
	for _, c := range s.connList() {
		_ = c.wc.Send(0, m)
	}
}

// connList returns the connected routers.
func (s *Server) connList() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Routers counts connected routers.
func (s *Server) Routers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) conn(id uint64) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[id]
}

// Shutdown drains: it sends GOAWAY to every router, refuses new requests,
// lets running ones finish until ctx ends (or DrainTimeout), then closes.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	lns := s.lns
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	s.Broadcast(s.goaway())
	if s.cfg.DrainTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.DrainTimeout)
		defer cancel()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.idle() {
		select {
		case <-ctx.Done():
			s.flushAll()
			s.Close()
			return ctx.Err()
		case <-tick.C:
		}
	}
	s.flushAll()
	s.Close()
	return nil
}

// flushAll writes what every connection still has pending (the GOAWAY, the
// last tokens) before Close cuts the sockets: a Send that found another
// goroutine writing left its frame to that goroutine, which may not have
// written it yet. A router that does not read gets a second.
func (s *Server) flushAll() {
	for _, c := range s.connList() {
		_ = c.wc.NetConn.SetWriteDeadline(time.Now().Add(time.Second))
		_ = c.wc.Sync()
	}
}

func (s *Server) goaway() *wire.Goaway {
	return &wire.Goaway{Code: wire.CodeShutdown, DrainMillis: uint32(s.cfg.DrainTimeout.Milliseconds()), Message: "engine shutting down"}
}

// idle reports whether no request runs and no handshake is under way (a
// router mid-handshake gets its GOAWAY when it completes).
func (s *Server) idle() bool {
	s.mu.Lock()
	handshaking := len(s.raw) > len(s.conns)
	s.mu.Unlock()
	return !handshaking && s.be.Idle()
}

// Close stops everything at once.
func (s *Server) Close() {
	s.mu.Lock()
	s.draining = true
	for _, ln := range s.lns {
		ln.Close()
	}
	s.cancel()
	for nc := range s.raw { // handshaking or serving: every socket we hold
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
