// Package servetest runs a wire/serve engine server on loopback for tests
// and connects to it as a router.
package servetest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Server is what Router needs of a serve.Server (an interface, so the
// package's own tests can use it without an import cycle).
type Server interface {
	Serve(net.Listener) error
	Close()
}

// Router serves s on a loopback port and returns a router's connection to
// it, handshake done, with a 20-second read deadline. Both close when the
// test ends.
func Router(t testing.TB, s Server) *wire.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, ln.Addr().String(), &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return c
}
