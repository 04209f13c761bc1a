package serve

import "github.com/kvgate/kvgate/wire"

// BroadcastIf sends m on stream 0 of every router whose HELLO announced
// feature f: frames an older router would refuse (ADAPTERS) reach only the
// routers that read them.
func (s *Server) BroadcastIf(f wire.Feature, m wire.Message) {
	for _, c := range s.connList() {
		if c.wc.Peer.Features&f != 0 {
			_ = c.wc.Send(0, m)
		}
	}
}

// PeerFeatures returns the features of connection connID's HELLO (0 when
// the router is gone).
func (s *Server) PeerFeatures(connID uint64) wire.Feature {
	if c := s.conn(connID); c != nil {
		return c.wc.Peer.Features
	}
	return 0
}
