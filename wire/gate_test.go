package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestMaxHandshakeFrameIsTheLargestHello: the constant is what its
// derivation says, the encoded size of the largest HELLO a dialer sends.
func TestMaxHandshakeFrameIsTheLargestHello(t *testing.T) {
	h := Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter, ID: strings.Repeat("r", 0xffff),
		Tiers: []TierCapacity{{TierGPU, 1}, {TierCPU, 2}, {TierDisk, 3}}}}
	p, err := h.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != MaxHandshakeFrame || MaxHandshakeFrame != 65690 {
		t.Fatalf("largest router HELLO is %d bytes, MaxHandshakeFrame %d (PROTOCOL.md: 65,690)", len(p), MaxHandshakeFrame)
	}
}

// acceptOne runs Server on one loopback connection and returns the raw
// dialer side and the acceptor's outcome.
func acceptOne(t *testing.T, cfg *HandshakeConfig) (net.Conn, <-chan handshakeResult) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan handshakeResult, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- handshakeResult{err: err}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Server(ctx, nc, cfg, nil)
		if err != nil {
			nc.Close()
		} else {
			t.Cleanup(func() { c.Close() })
		}
		done <- handshakeResult{c, err}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc, done
}

// TestHandshakeFrameCap: before the handshake completes an acceptor takes
// no frame over MaxHandshakeFrame (the largest HELLO passes), and answers
// a larger one with ERROR FRAME_TOO_LARGE before reading its payload;
// afterwards the connection's own limit applies again.
func TestHandshakeFrameCap(t *testing.T) {
	for _, secret := range []string{"", "k"} {
		t.Run("announced over the cap, secret "+secret, func(t *testing.T) {
			nc, done := acceptOne(t, engineCfg(secret))
			// A HELLO header announcing 16 MiB, then nothing: refused at once.
			if _, err := nc.Write(AppendHeader(nil, TypeHello, 0, 0, DefaultMaxFrameSize)); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if !errors.Is(res.err, ErrFrameTooLarge) {
				t.Fatalf("acceptor: %v, want ErrFrameTooLarge", res.err)
			}
			f, err := NewReader(nc, nil).ReadFrame()
			var e Error
			if err != nil || DecodeFrame(f, &e, nil) != nil || e.Code != CodeFrameTooLarge {
				t.Fatalf("dialer got %v %+v %v, want ERROR FRAME_TOO_LARGE", f.Type, e, err)
			}
		})
	}
	t.Run("AUTH over the cap", func(t *testing.T) {
		nc, done := acceptOne(t, engineCfg("k"))
		r, w := NewReader(nc, nil), NewWriter(nc)
		if err := w.Send(0, &Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter, ID: "r"}}); err != nil {
			t.Fatal(err)
		}
		if f, err := r.ReadFrame(); err != nil || f.Type != TypeWelcome {
			t.Fatalf("want WELCOME, got %v %v", f.Type, err)
		}
		if _, err := nc.Write(AppendHeader(nil, TypeAuth, 0, 0, MaxHandshakeFrame+1)); err != nil {
			t.Fatal(err)
		}
		if res := <-done; !errors.Is(res.err, ErrFrameTooLarge) {
			t.Fatalf("acceptor: %v, want ErrFrameTooLarge", res.err)
		}
	})
	t.Run("largest HELLO passes, then the full limit", func(t *testing.T) {
		nc, done := acceptOne(t, engineCfg(""))
		r, w := NewReader(nc, nil), NewWriter(nc)
		hello := &Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter, ID: strings.Repeat("r", 0xffff),
			Tiers: []TierCapacity{{TierGPU, 1}, {TierCPU, 2}, {TierDisk, 3}}}}
		if err := w.Send(0, hello); err != nil {
			t.Fatal(err)
		}
		if f, err := r.ReadFrame(); err != nil || f.Type != TypeWelcome {
			t.Fatalf("want WELCOME, got %v %v", f.Type, err)
		}
		res := <-done
		if res.err != nil {
			t.Fatalf("acceptor refused the largest HELLO: %v", res.err)
		}
		big := &Ring{Body: bytes.Repeat([]byte{7}, 4*MaxHandshakeFrame)}
		if err := w.Send(0, big); err != nil {
			t.Fatal(err)
		}
		f, err := res.conn.ReadFrame()
		if err != nil || len(f.Payload) != len(big.Body) {
			t.Fatalf("after the handshake a %d-byte frame: %v (%d bytes)", len(big.Body), err, len(f.Payload))
		}
		if got := res.conn.Limits().MaxFrameSize; got != DefaultMaxFrameSize {
			t.Fatalf("limit after the handshake %d, want %d", got, DefaultMaxFrameSize)
		}
	})
}

// TestHandshakeGate: a full gate closes the connection that has waited
// longest; leaving is idempotent and frees a place.
func TestHandshakeGate(t *testing.T) {
	g := NewHandshakeGate(2)
	type pair struct{ local, remote net.Conn }
	var ps []pair
	for range 3 {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		ps = append(ps, pair{a, b})
	}
	leave0 := g.Enter(ps[0].local)
	leave1 := g.Enter(ps[1].local)
	if g.Pending() != 2 || g.Evicted() != 0 {
		t.Fatalf("pending %d evicted %d, want 2 and 0", g.Pending(), g.Evicted())
	}
	leave2 := g.Enter(ps[2].local) // full: the oldest, 0, is closed
	if _, err := ps[0].remote.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("oldest connection still open: %v", err)
	}
	if g.Pending() != 2 || g.Evicted() != 1 {
		t.Fatalf("pending %d evicted %d, want 2 and 1", g.Pending(), g.Evicted())
	}
	leave0() // evicted already: nothing changes
	leave1()
	leave1()
	if g.Pending() != 1 {
		t.Fatalf("pending %d after leaving, want 1", g.Pending())
	}
	_ = ps[1].remote.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := ps[1].remote.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
		t.Fatal("a connection that left the gate was closed")
	}
	leave2()
	if g.Pending() != 0 || NewHandshakeGate(0).Max() != DefaultMaxHandshakes {
		t.Fatalf("pending %d, default max %d", g.Pending(), NewHandshakeGate(0).Max())
	}
}

// TestRequestCode: limits and values are the request's fault, anything
// else the connection's.
func TestRequestCode(t *testing.T) {
	lim := DefaultLimits()
	over := &Generate{RequestID: []byte("r"), Model: []byte("m"), TopP: 1, DPRank: AnyRank,
		StopTokens: TokensOf(make([]uint32, lim.MaxStopTokens+1)), Prompt: TokensOf([]uint32{1})}
	bad := &Generate{RequestID: []byte("r"), Model: []byte("m"), TopP: 2, Prompt: TokensOf([]uint32{1})}
	for _, tc := range []struct {
		name string
		m    *Generate
		trim int
		code ErrorCode
		ok   bool
	}{
		{"too many stop tokens", over, 0, CodeRequestLimit, true},
		{"top_p out of range", bad, 0, CodeBadRequest, true},
		{"truncated", bad, 3, 0, false},
	} {
		p, err := tc.m.AppendPayload(nil)
		if err != nil {
			t.Fatal(err)
		}
		err = (&Generate{}).Decode(p[:len(p)-tc.trim], &lim)
		if code, ok := RequestCode(err); code != tc.code || ok != tc.ok {
			t.Errorf("%s: RequestCode(%v) = %v %v, want %v %v", tc.name, err, code, ok, tc.code, tc.ok)
		}
	}
}

// TestGenerateCheckLimits: PayloadSize is the encoded size, and
// CheckLimits refuses what Decode (or the frame header) would.
func TestGenerateCheckLimits(t *testing.T) {
	lim := DefaultLimits()
	lim.MaxFrameSize = 1 << 16
	for _, c := range goldenCases() {
		g, ok := c.msg.(*Generate)
		if !ok {
			continue
		}
		p, err := g.AppendPayload(nil)
		if err != nil || len(p) != g.PayloadSize() {
			t.Fatalf("%s: PayloadSize %d, encoded %d (%v)", c.name, g.PayloadSize(), len(p), err)
		}
		if err := g.CheckLimits(&lim); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	base := func() *Generate {
		return &Generate{RequestID: []byte("r"), Model: []byte("m"), TopP: 1, Prompt: TokensOf([]uint32{1})}
	}
	stops, long, mm, big := base(), base(), base(), base()
	stops.StopTokens = TokensOf(make([]uint32, lim.MaxStopTokens+1))
	long.Prompt = TokensOf(make([]uint32, lim.MaxTokens+1))
	mm.MMItems = MMItemsOf(make([]MMItem, lim.MaxListItems+1))
	big.Guided = make([]byte, lim.MaxFrameSize)
	for _, tc := range []struct {
		name string
		g    *Generate
		want error
	}{{"stops", stops, ErrLimit}, {"prompt", long, ErrLimit}, {"mm_items", mm, ErrLimit}, {"frame", big, ErrFrameTooLarge}} {
		if err := tc.g.CheckLimits(&lim); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// FuzzAcceptHandshake: whatever a peer sends before the handshake
// completes, in whatever pieces, the acceptor's buffer never grows past
// one header and MaxHandshakeFrame, and the frame limit is restored after.
func FuzzAcceptHandshake(f *testing.F) {
	hello, _ := AppendFrame(nil, 0, &Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter, ID: "r"}})
	auth, _ := AppendFrame(nil, 0, &Auth{})
	f.Add(hello, uint16(7), false)
	f.Add(append(hello, auth...), uint16(3), true)
	f.Add(AppendHeader(nil, TypeHello, 0, 0, DefaultMaxFrameSize), uint16(12), false)
	f.Add(append(AppendHeader(nil, TypeHello, 0, 0, MaxHandshakeFrame), bytes.Repeat([]byte{'K'}, 5000)...), uint16(999), false)
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, secret bool) {
		r := newReaderSize(&chunkReader{data: data, sizes: []int{int(chunk%8192) + 1}}, nil, handshakeBufferSize)
		cfg := engineCfg("")
		if secret {
			cfg = engineCfg("k")
		}
		_, _ = AcceptHandshake(r, NewWriter(io.Discard), cfg)
		if len(r.buf) > HeaderSize+MaxHandshakeFrame {
			t.Fatalf("buffer of %d bytes before the handshake completed", len(r.buf))
		}
		if r.lim.MaxFrameSize != DefaultMaxFrameSize {
			t.Fatalf("frame limit %d after the handshake", r.lim.MaxFrameSize)
		}
	})
}
