package serve

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestSuspend: a suspended server ends its routers' connections with ERROR
// SHUTDOWN, cancels their requests and refuses new routers before the
// handshake; after Resume routers connect again.
func TestSuspend(t *testing.T) {
	f := &fake{}
	s := New(Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}}}, f)
	f.srv = s
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Close)
	dial := func() (*wire.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return wire.Dial(ctx, ln.Addr().String(), &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r"}}, nil)
	}
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.NetConn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		if f.Idle() {
			return errors.New("GENERATE not received")
		}
		return nil
	})
	s.Suspend("engine unreachable: connection refused")
	if s.Suspended() == "" {
		t.Fatal("not suspended")
	}
	expectError(t, c, 0, wire.CodeShutdown)
	checkFor(t, 10*time.Second, time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.cancelled) != 1 {
			return errors.New("the running request was not cancelled")
		}
		return nil
	})
	if c2, err := dial(); err == nil {
		c2.Close()
		t.Fatal("a router completed its handshake with a suspended server")
	}
	if s.Routers() != 0 {
		t.Fatalf("%d routers connected while suspended", s.Routers())
	}
	s.Resume()
	c3, err := dial()
	if err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	c3.Close()
}
