package serve

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/kvgate/kvgate/wire"
)

// Images (PROTOCOL.md 6.11): a GENERATE with the MEDIA flag waits here,
// copied, until the MEDIA frames after it on its stream have brought every
// item's bytes; then the items are checked (wire.CheckMedia) and the
// request goes to the Backend like any other, its Media filled.
//
// The check hashes every byte (XXH3-128, about 1 ms per 10 MB), so it runs
// on a goroutine of its own: the connection's read loop goes on with the
// router's other frames and streams meanwhile. That stream's own frames
// keep their order: while it is checked, a GENERATE on it is a duplicate,
// its MEDIA frames are ignored (as after the last byte ever), and a CANCEL
// is recorded and acted on by the check goroutine: before the backend
// has the request, the stream ends CANCELLED and nothing runs; after
// Backend.Generate returned, the backend gets its Cancel, never before
// its Generate. dropConn waits for the checks before it cancels what the
// backend runs.
//
// Every stream's declared media sizes count against the connection's
// Limits.MaxPendingMediaBytes from its GENERATE until its check is done
// or the stream ends: a GENERATE that would pass it ends with OVERLOADED
// (another engine, or this one later, may take it).
//
// Ownership: mediaState.assembling is the read loop's alone; checks,
// pending and closed are under conn.mu, with conn.streams, so that a
// stream moves from checked to open in one step.

// checkMedia checks an assembled GENERATE; tests replace it to hold a
// check open.
var checkMedia = wire.CheckMedia

// mediaState is a connection's requests whose images are not yet with the
// backend.
type mediaState struct {
	assembling map[uint32]*assembly // read loop only
	checks     map[uint32]*mediaCheck
	pending    int  // declared bytes of assembling and checks not done
	closed     bool // the connection is being dropped: start nothing
	wg         sync.WaitGroup
}

// assembly is a stream's media on the way, and the bytes it holds of the
// connection's bound.
type assembly struct {
	a    *wire.MediaAssembly
	size int
}

// mediaCheck is a stream whose bytes are all there and being checked.
type mediaCheck struct {
	cancelled bool // CANCEL arrived meanwhile
}

// checking reports whether stream's images are being checked; c.mu held.
func (c *conn) checking(stream uint32) bool { return c.media.checks[stream] != nil }

// awaitMedia parks a GENERATE with media until its bytes arrive.
func (s *Server) awaitMedia(c *conn, stream uint32, g *wire.Generate) {
	c.mu.Lock()
	_, open := c.streams[stream]
	open = open || c.checking(stream)
	c.mu.Unlock()
	switch {
	case s.Draining():
		_ = c.wc.SendError(stream, wire.CodeOverloaded, "engine is draining")
		return
	case open || c.media.assembling[stream] != nil:
		_ = c.wc.SendError(stream, wire.CodeDuplicate, "stream is open")
		return
	}
	if err := g.CheckFeatures(s.cfg.Handshake.Features); err != nil {
		s.refuse(c, stream, wire.CodeBadRequest, err.Error())
		return
	}
	a, err := wire.NewMediaAssembly(g, &s.cfg.Limits)
	if err != nil {
		s.refuse(c, stream, wire.CodeBadRequest, err.Error())
		return
	}
	size := 0
	for i := range g.Media.Len() {
		size += g.Media.Size(i)
	}
	limit := cmp.Or(s.cfg.Limits.MaxPendingMediaBytes, wire.DefaultMaxPendingMediaBytes)
	c.mu.Lock()
	held := c.media.pending
	if held+size <= limit {
		c.media.pending += size
	}
	c.mu.Unlock()
	if held+size > limit {
		s.refuse(c, stream, wire.CodeOverloaded, fmt.Sprintf("images of %d bytes: the connection's other requests hold %d bytes of images not yet started, and max_pending_media_bytes is %d",
			size, held, limit))
		return
	}
	if c.media.assembling == nil {
		c.media.assembling = map[uint32]*assembly{}
	}
	c.media.assembling[stream] = &assembly{a: a, size: size}
}

// release gives back size bytes of the connection's bound.
func (c *conn) release(size int) {
	c.mu.Lock()
	c.media.pending -= size
	c.mu.Unlock()
}

// mediaFrame takes a MEDIA frame. One for a stream that awaits none (its
// GENERATE was refused, or cancelled, or its bytes are all there) is
// ignored; one out of order fails that request alone. A MEDIA payload
// that does not decode ends the connection, as any malformed frame does.
func (s *Server) mediaFrame(c *conn, f wire.Frame) error {
	var ch wire.MediaChunk
	if err := wire.DecodeFrame(f, &ch, &s.cfg.Limits); err != nil {
		return err
	}
	as := c.media.assembling[f.Stream]
	if as == nil {
		return nil
	}
	if err := as.a.Add(&ch); err != nil {
		delete(c.media.assembling, f.Stream)
		c.release(as.size)
		s.refuse(c, f.Stream, wire.CodeBadRequest, err.Error())
		return nil
	}
	if !as.a.Done() {
		return nil
	}
	delete(c.media.assembling, f.Stream)
	g, err := as.a.Generate()
	if err != nil {
		c.release(as.size)
		s.refuse(c, f.Stream, wire.CodeBadRequest, err.Error())
		return nil
	}
	mc := &mediaCheck{}
	c.mu.Lock()
	if c.media.closed {
		c.mu.Unlock()
		c.release(as.size)
		return nil
	}
	if c.media.checks == nil {
		c.media.checks = map[uint32]*mediaCheck{}
	}
	c.media.checks[f.Stream] = mc
	c.media.wg.Add(1)
	c.mu.Unlock()
	go s.checkThenGenerate(c, f.Stream, g, mc, as.size)
	return nil
}

// checkThenGenerate checks a stream's assembled images and hands the
// request to the backend, unless it was cancelled meanwhile or its
// connection is being dropped.
func (s *Server) checkThenGenerate(c *conn, stream uint32, g *wire.Generate, mc *mediaCheck, size int) {
	defer c.media.wg.Done()
	err := checkMedia(g)
	draining := s.Draining()
	c.mu.Lock()
	c.media.pending -= size // checked: the backend has the bytes, or nobody does
	closed, cancelled := c.media.closed, mc.cancelled
	run := err == nil && !closed && !cancelled && !draining
	if run {
		c.streams[stream] = struct{}{} // open before it leaves checks: no duplicate slips between
	} else {
		delete(c.media.checks, stream)
	}
	c.mu.Unlock()
	switch {
	case closed: // nobody reads an answer
	case err != nil:
		s.log.Info("refusing a request", "router", c.wc.Peer.ID, "stream", stream, "code", wire.CodeBadRequest.String(), "err", err)
		_ = c.wc.SendError(stream, wire.CodeBadRequest, err.Error())
	case cancelled:
		_ = c.wc.SendError(stream, wire.CodeCancelled, "cancelled while its media were checked")
	case draining:
		_ = c.wc.SendError(stream, wire.CodeOverloaded, "engine is draining")
	}
	if !run {
		return
	}
	s.start(c, stream, g)
	c.mu.Lock()
	delete(c.media.checks, stream)
	_, open := c.streams[stream]
	cancel := mc.cancelled && open && !c.media.closed // dropConn cancels what is open once closed
	c.mu.Unlock()
	if cancel {
		s.be.Cancel(Key{Conn: c.id, Stream: stream})
	}
	s.endBatch(c)
}

// cancelMedia handles CANCEL for a request whose images are not yet with
// the backend, reporting whether there was one. One still receiving its
// bytes ends with CANCELLED now (nothing ran); one being checked is
// marked, for checkThenGenerate.
func (s *Server) cancelMedia(c *conn, stream uint32) bool {
	if as := c.media.assembling[stream]; as != nil {
		delete(c.media.assembling, stream)
		c.release(as.size)
		_ = c.wc.SendError(stream, wire.CodeCancelled, "cancelled while its media arrived")
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mc := c.media.checks[stream]
	if mc != nil {
		mc.cancelled = true
	}
	return mc != nil
}

// stopMedia is dropConn's first step: no check starts a request from now
// on, and the ones under way have finished when it returns.
func (s *Server) stopMedia(c *conn) {
	c.mu.Lock()
	c.media.closed = true
	c.mu.Unlock()
	c.media.wg.Wait()
}

// checkPlain refuses what a GENERATE without media must not be: one on a
// stream still waiting for media, images to an engine without
// FeatureMultimodal, or mm items without their media (PROTOCOL.md 6.11).
// It reports whether g may run.
func (s *Server) checkPlain(c *conn, stream uint32, g *wire.Generate) bool {
	if c.media.assembling[stream] != nil {
		_ = c.wc.SendError(stream, wire.CodeDuplicate, "stream is open")
		return false
	}
	if g.MMItems.Len() == 0 {
		return true
	}
	err := g.CheckFeatures(s.cfg.Handshake.Features)
	if err == nil {
		err = wire.CheckMedia(g) // without media: fails at the pairing, hashing nothing
	}
	if err != nil {
		s.refuse(c, stream, wire.CodeBadRequest, err.Error())
		return false
	}
	return true
}
