package syncring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestSilentPeersBounded: connections that never finish a handshake (silent
// ones, and ones that announce the largest HELLO and send four bytes of it)
// are held MaxHandshakes at a time, the oldest closed first; a frame over
// the handshake cap is refused on its header; the ring goes on and a peer
// with the secret still connects among them.
func TestSilentPeersBounded(t *testing.T) {
	rs := fleet(t, 2, func(c *Config) { c.MaxHandshakes = 4; c.HandshakeTimeout = time.Hour })
	converged(t, rs, "2 replicas")
	target := rs[0]
	for i := range 40 {
		nc, err := net.Dial("tcp", target.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		if i%2 == 1 {
			_, _ = nc.Write(append(wire.AppendHeader(nil, wire.TypeHello, 0, 0, wire.MaxHandshakeFrame), "KVGW"...))
		}
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if p, e := target.ring.gate.Pending(), target.ring.gate.Evicted(); p > 4 || e < 36 {
			return fmt.Errorf("%d pending, %d closed: want at most 4 and at least 36", p, e)
		}
		return nil
	})

	nc, err := net.Dial("tcp", target.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, _ = nc.Write(wire.AppendHeader(nil, wire.TypeHello, 0, 0, wire.DefaultMaxFrameSize))
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := wire.NewReader(nc, nil).ReadFrame()
	var e wire.Error
	if err != nil || wire.DecodeFrame(f, &e, nil) != nil || e.Code != wire.CodeFrameTooLarge {
		t.Fatalf("a 16 MiB HELLO header: got %v %+v %v, want ERROR FRAME_TOO_LARGE", f.Type, e, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	good := &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RolePeer, ID: "r07", Features: wire.FeatureRingByKey}, Secret: []byte("ring-secret")}
	c, err := wire.Dial(ctx, target.addr, good, nil)
	if err != nil {
		t.Fatalf("a peer with the secret among the silent ones: %v", err)
	}
	c.Close()
	converged(t, rs, "ring unaffected")
}

// TestHandshakeTimeout: an inbound connection that sends nothing is closed
// after HandshakeTimeout (50 ms here; the default, 5 s, would outlast the
// 4 s this test waits).
func TestHandshakeTimeout(t *testing.T) {
	rs := fleet(t, 1, func(c *Config) { c.HandshakeTimeout = 50 * time.Millisecond })
	nc, err := net.Dial("tcp", rs[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(4 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err = nc.Read(buf) // an ERROR may come first, then the close
		if err != nil {
			break
		}
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("a silent connection was held past the handshake timeout")
	}
}
