package sim

import (
	"fmt"
	"net"
)

// Local is a fleet of simulated engines serving on loopback in this
// process: real TCP and the real wire protocol. It is kvgate's embedded
// default (--sim-engines), so a newcomer needs no GPU and no files.
type Local struct {
	Servers []*Server
	// Addrs and IDs are the engines' addresses and ids, in the order of
	// Servers.
	Addrs, IDs []string
}

// StartLocal starts n engines on 127.0.0.1 with random ports, each a copy
// of base with the id "<prefix>-<i>" (prefix "sim" when empty).
func StartLocal(n int, base Config, prefix string) (*Local, error) {
	if prefix == "" {
		prefix = "sim"
	}
	l := &Local{}
	for i := range n {
		cfg := base
		cfg.ID = fmt.Sprintf("%s-%d", prefix, i)
		s, err := NewServer(cfg)
		if err != nil {
			l.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.Close()
			l.Close()
			return nil, err
		}
		go func() { _ = s.Serve(ln) }()
		l.Servers = append(l.Servers, s)
		l.Addrs = append(l.Addrs, ln.Addr().String())
		l.IDs = append(l.IDs, cfg.ID)
	}
	return l, nil
}

// Close stops every engine.
func (l *Local) Close() {
	for _, s := range l.Servers {
		s.Close()
	}
}
