package syncring

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestUnauthenticatedChangesNothing: a peer without the secret, a client
// that skips the handshake, and an authenticated peer that sends chunks
// and reservations of another epoch all leave the view as it was.
func TestUnauthenticatedChangesNothing(t *testing.T) {
	rs := fleet(t, 2, nil)
	converged(t, rs, "2 replicas")
	target := rs[0]
	want := sumOf(rs)

	// Wrong secret: refused at the handshake.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bad := &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RolePeer, ID: "mallory"}, Secret: []byte("guess")}
	if _, err := wire.Dial(ctx, target.addr, bad, nil); err == nil {
		t.Fatal("a peer with the wrong secret was accepted")
	}

	// No handshake at all: a RING frame straight away.
	nc, err := net.Dial("tcp", target.addr)
	if err != nil {
		t.Fatal(err)
	}
	body := appendReserve(nil, 0, &reserveBatch{Tag: 1, Items: []reservation{{Engine: 1, Load: Load{PrefillTokens: 1 << 30, Requests: 1}}}})
	frame, _ := wire.AppendFrame(nil, 0, &wire.Ring{Body: body})
	_, _ = nc.Write(frame)
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = nc.Read(make([]byte, 256)) // the ERROR, then EOF
	nc.Close()

	// Authenticated, but with a made-up epoch.
	good := &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RolePeer, ID: "r01", Features: wire.FeatureRingByKey}, Secret: []byte("ring-secret")}
	c, err := wire.Dial(ctx, target.addr, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := target.ring.Stats().Ignored
	for _, b := range [][]byte{
		appendReserve(nil, 12345, &reserveBatch{Tag: 1, Items: []reservation{{Engine: 2, Load: Load{PrefillTokens: 1 << 30, Requests: 1}}}}),
		appendChunk(nil, 12345, &chunk{Round: 1 << 40, Index: 1, Values: make([]int64, 11)}, nil),
	} {
		if err := c.Send(0, &wire.Ring{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		target.ring.publishStatsSoon()
		if n := target.ring.Stats().Ignored - before; n < 2 {
			return fmt.Errorf("%d of the 2 messages ignored", n)
		}
		return nil
	})
	checkFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if n := target.ring.Stats().Refused; n < 2 {
			return fmt.Errorf("stats count %d refused, want 2", n)
		}
		return nil
	})
	converged(t, rs, "view unchanged")
	if !target.agrees(want) {
		t.Fatal("the view changed")
	}

	// A malformed ring body ends that connection, not the ring.
	if err := c.Send(0, &wire.Ring{Body: []byte{byte(kindChunk), 1, 2}}); err != nil {
		t.Fatal(err)
	}
	_ = c.NetConn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.ReadFrame()
	if err != nil || f.Type != wire.TypeError {
		t.Fatalf("malformed body: got %v %v, want an ERROR frame", f.Type, err)
	}
	converged(t, rs, "ring unaffected")
}
