package serve

import "github.com/kvgate/kvgate/wire"

// Suspend closes every router connection, with an ERROR SHUTDOWN that says
// why, and refuses new ones (closed before the handshake) until Resume.
// A bridge suspends while the engine behind it is unreachable, so routers
// see the engine as down and try it no more, instead of a ready engine
// that fails every request. The backend's running requests are cancelled
// as their connections close.
func (s *Server) Suspend(reason string) {
	if reason == "" {
		reason = "engine unavailable"
	}
	s.mu.Lock()
	was := s.suspended
	s.suspended = reason
	s.mu.Unlock()
	if was != "" {
		return
	}
	s.log.Warn("refusing routers", "reason", reason)
	for _, c := range s.connList() {
		_ = c.wc.SendError(0, wire.CodeShutdown, reason)
		_ = c.wc.Close() // its read loop ends and drops it
	}
}

// Resume takes routers again after Suspend.
func (s *Server) Resume() {
	s.mu.Lock()
	was := s.suspended
	s.suspended = ""
	s.mu.Unlock()
	if was != "" {
		s.log.Info("taking routers again", "was", was)
	}
}

// Suspended returns why routers are refused, "" when they are not.
func (s *Server) Suspended() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended
}
