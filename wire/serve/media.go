package serve

import (
	"github.com/kvgate/kvgate/wire"
)

// Images (PROTOCOL.md 6.11): a GENERATE with the MEDIA flag waits here,
// copied, until the MEDIA frames after it on its stream have brought every
// item's bytes; then the items are checked (wire.CheckMedia) and the
// request goes to the Backend like any other, its Media filled. All of it
// runs on the connection's read loop, which alone touches conn.media.

// awaitMedia parks a GENERATE with media until its bytes arrive.
func (s *Server) awaitMedia(c *conn, stream uint32, g *wire.Generate) {
	c.mu.Lock()
	_, open := c.streams[stream]
	c.mu.Unlock()
	switch {
	case s.Draining():
		_ = c.wc.SendError(stream, wire.CodeOverloaded, "engine is draining")
		return
	case open || c.media[stream] != nil:
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
	if c.media == nil {
		c.media = map[uint32]*wire.MediaAssembly{}
	}
	c.media[stream] = a
}

// mediaFrame takes a MEDIA frame. One for a stream that awaits none (its
// GENERATE was refused, or cancelled) is ignored; one out of order fails
// that request alone. A MEDIA payload that does not decode ends the
// connection, as any malformed frame does.
func (s *Server) mediaFrame(c *conn, f wire.Frame) error {
	var ch wire.MediaChunk
	if err := wire.DecodeFrame(f, &ch, &s.cfg.Limits); err != nil {
		return err
	}
	a := c.media[f.Stream]
	if a == nil {
		return nil
	}
	if err := a.Add(&ch); err != nil {
		delete(c.media, f.Stream)
		s.refuse(c, f.Stream, wire.CodeBadRequest, err.Error())
		return nil
	}
	if !a.Done() {
		return nil
	}
	delete(c.media, f.Stream)
	g, err := a.Generate()
	if err == nil {
		err = wire.CheckMedia(g)
	}
	if err != nil {
		s.refuse(c, f.Stream, wire.CodeBadRequest, err.Error())
		return nil
	}
	s.generate(c, f.Stream, g)
	return nil
}

// cancelMedia ends a request still waiting for its media, reporting
// whether there was one: nothing ran, so the stream ends with CANCELLED.
func (s *Server) cancelMedia(c *conn, stream uint32) bool {
	if c.media[stream] == nil {
		return false
	}
	delete(c.media, stream)
	_ = c.wc.SendError(stream, wire.CodeCancelled, "cancelled while its media arrived")
	return true
}

// checkPlain refuses what a GENERATE without media must not be: one on a
// stream still waiting for media, images to an engine without
// FeatureMultimodal, or mm items without their media (PROTOCOL.md 6.11).
// It reports whether g may run.
func (s *Server) checkPlain(c *conn, stream uint32, g *wire.Generate) bool {
	if c.media[stream] != nil {
		_ = c.wc.SendError(stream, wire.CodeDuplicate, "stream is open")
		return false
	}
	if g.MMItems.Len() == 0 {
		return true
	}
	err := g.CheckFeatures(s.cfg.Handshake.Features)
	if err == nil {
		err = wire.CheckMedia(g)
	}
	if err != nil {
		s.refuse(c, stream, wire.CodeBadRequest, err.Error())
		return false
	}
	return true
}
