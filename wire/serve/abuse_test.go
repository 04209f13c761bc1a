package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// listen serves s on a loopback port until the test ends.
func listen(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Close)
	return ln.Addr().String()
}

func dialRouter(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c
}

// TestRequestRefusedKeepsConnection: a GENERATE over a limit or with a
// field out of range fails only its stream; the stream already open and
// the connection go on. A GENERATE that is not whole still closes.
func TestRequestRefusedKeepsConnection(t *testing.T) {
	f := &fake{}
	lim := wire.DefaultLimits()
	lim.MaxTokens = 8
	s := New(Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}}, Limits: lim}, f)
	f.srv = s
	c := dialRouter(t, listen(t, s))
	if err := c.Send(1, gen()); err != nil { // the stream that must survive
		t.Fatal(err)
	}
	stops := gen()
	stops.StopTokens = wire.TokensOf(make([]uint32, lim.MaxStopTokens+1))
	long := gen()
	long.Prompt = wire.TokensOf(make([]uint32, lim.MaxTokens+1))
	hot := gen()
	hot.Temperature = 2000
	for _, tc := range []struct {
		stream uint32
		m      *wire.Generate
		code   wire.ErrorCode
	}{
		{3, stops, wire.CodeRequestLimit},
		{5, long, wire.CodeRequestLimit},
		{7, hot, wire.CodeBadRequest},
		{1, stops, wire.CodeDuplicate}, // on the open stream: that one goes on
	} {
		if err := c.Send(tc.stream, tc.m); err != nil {
			t.Fatal(err)
		}
		expectError(t, c, tc.stream, tc.code)
	}
	_ = c.Send(1, &wire.Cancel{})
	for {
		fr, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("stream 1 did not end: %v", err)
		}
		var m wire.TokensMsg
		if fr.Type == wire.TypeTokens && fr.Stream == 1 && wire.DecodeFrame(fr, &m, nil) == nil && m.Last() {
			break
		}
	}
	f.mu.Lock()
	n := len(f.generated)
	f.mu.Unlock()
	if n != 1 || s.Routers() != 1 {
		t.Fatalf("backend saw %d requests (want 1: the refused ones never reach it), %d routers", n, s.Routers())
	}

	p, _ := gen().AppendPayload(nil)
	p = p[:len(p)-2] // a broken encoder: the frame's length says less than the fields
	if _, err := c.NetConn.Write(append(wire.AppendHeader(nil, wire.TypeGenerate, 0, 9, len(p)), p...)); err != nil {
		t.Fatal(err)
	}
	expectError(t, c, 0, wire.CodeProtocol)
}

// TestHandshakeBounds: silent and half-sent HELLOs beyond MaxHandshakes
// are closed, oldest first; a router still connects among them; a
// handshake that outlasts HandshakeTimeout is closed.
func TestHandshakeBounds(t *testing.T) {
	hs := wire.Handshake{Role: wire.RoleEngine, ID: "e", BlockSize: 16, Models: []string{"m"}}
	f := &fake{}
	s := New(Config{Handshake: hs, MaxHandshakes: 4, HandshakeTimeout: time.Hour}, f)
	f.srv = s
	addr := listen(t, s)
	var socks []net.Conn
	for i := range 24 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		if i%2 == 1 { // half a HELLO: a header that announces the largest, a few bytes of it
			_, _ = nc.Write(append(wire.AppendHeader(nil, wire.TypeHello, 0, 0, wire.MaxHandshakeFrame), "KVGW"...))
		}
		socks = append(socks, nc)
	}
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if s.gate.Evicted() < 20 || s.Handshaking() > 4 {
			return fmt.Errorf("%d handshaking, %d closed, want at most 4 and at least 20", s.Handshaking(), s.gate.Evicted())
		}
		return nil
	})
	_ = socks[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := socks[0].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the oldest silent connection: %v, want EOF", err)
	}
	c := dialRouter(t, addr)
	if err := c.Send(1, gen()); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.generated) != 1 {
			return errors.New("the router's GENERATE did not arrive")
		}
		return nil
	})

	quick := New(Config{Handshake: hs, HandshakeTimeout: 50 * time.Millisecond}, &fake{})
	nc, err := net.Dial("tcp", listen(t, quick))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// 50 ms configured; the default (10 s) would outlast this wait.
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("a silent connection past the handshake timeout: %v, want EOF", err)
	}
	checkFor(t, 30*time.Second, time.Millisecond, func() error {
		if n := quick.Handshaking(); n != 0 {
			return fmt.Errorf("%d still handshaking", n)
		}
		return nil
	})
}
