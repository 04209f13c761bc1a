package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

type handshakeResult struct {
	conn *Conn
	err  error
}

// pair runs both handshakes over loopback TCP and returns both outcomes.
func pair(t *testing.T, dialer, acceptor *HandshakeConfig) (d, a handshakeResult) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan handshakeResult, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- handshakeResult{err: err}
			return
		}
		c, err := Server(ctx, nc, acceptor, nil)
		if err != nil {
			nc.Close()
		}
		done <- handshakeResult{c, err}
	}()
	c, err := Dial(ctx, ln.Addr().String(), dialer, nil)
	d = handshakeResult{c, err}
	a = <-done
	t.Cleanup(func() {
		for _, r := range []handshakeResult{d, a} {
			if r.conn != nil {
				r.conn.Close()
			}
		}
	})
	return d, a
}

func routerCfg(secret string) *HandshakeConfig {
	return &HandshakeConfig{Secret: []byte(secret), Local: Handshake{Role: RoleRouter, ID: "router"}}
}

func engineCfg(secret string) *HandshakeConfig {
	return &HandshakeConfig{Secret: []byte(secret), Local: Handshake{Role: RoleEngine, ID: "engine",
		HashScheme: HashXXH3Chained, BlockSize: 16, Models: []string{"m"}}}
}

func TestHandshake(t *testing.T) {
	tests := []struct {
		name             string
		dialer, acceptor string
		wantOK           bool
		acceptorSeesIt   bool // false: the acceptor needs no proof and learns of the refusal from the ERROR that follows
	}{
		{"no secrets", "", "", true, true},
		{"same secret", "k", "k", true, true},
		{"different secrets", "k", "x", false, true},
		{"only dialer has a secret", "k", "", false, false},
		{"only acceptor has a secret", "", "k", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, a := pair(t, routerCfg(tc.dialer), engineCfg(tc.acceptor))
			if tc.wantOK {
				if d.err != nil || a.err != nil {
					t.Fatalf("dialer %v, acceptor %v", d.err, a.err)
				}
				if d.conn.Peer.ID != "engine" || a.conn.Peer.ID != "router" || d.conn.Peer.BlockSize != 16 {
					t.Fatalf("peers: %+v / %+v", d.conn.Peer, a.conn.Peer)
				}
				// The connection carries frames after the handshake.
				if err := d.conn.Send(0, &Ping{Data: 9}); err != nil {
					t.Fatal(err)
				}
				f, err := a.conn.ReadFrame()
				if err != nil || f.Type != TypePing {
					t.Fatalf("after handshake: %v %v", f.Type, err)
				}
				return
			}
			if !errors.Is(d.err, ErrAuth) {
				t.Errorf("dialer: got %v, want ErrAuth", d.err)
			}
			if tc.acceptorSeesIt {
				if a.err == nil {
					t.Errorf("acceptor accepted")
				}
				return
			}
			f, err := a.conn.ReadFrame()
			if err != nil || f.Type != TypeError {
				t.Fatalf("acceptor: want the dialer's ERROR, got %v %v", f.Type, err)
			}
		})
	}
}

// TestUnauthenticatedPeerCannotInject: a dialer that skips AUTH and sends
// KV_EVENTS is refused with an ERROR and its frame never reaches the caller.
func TestUnauthenticatedPeerCannotInject(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	res := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			res <- err
			return
		}
		defer nc.Close()
		_, err = Server(context.Background(), nc, engineCfg("k"), nil)
		res <- err
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r, w := NewReader(nc, nil), NewWriter(nc)
	if err := w.Send(0, &Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter}}); err != nil {
		t.Fatal(err)
	}
	if f, err := r.ReadFrame(); err != nil || f.Type != TypeWelcome {
		t.Fatalf("want WELCOME, got %v %v", f.Type, err)
	}
	ev := &KVEvents{Events: []Event{{Kind: EventStored, Hashes: HashesOf([]uint64{1})}}}
	if err := w.Send(0, ev); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Fatalf("acceptor: got %v, want ErrAuth", err)
	}
	f, err := r.ReadFrame()
	if err != nil || f.Type != TypeError {
		t.Fatalf("want ERROR, got %v %v", f.Type, err)
	}
	var e Error
	if err := DecodeFrame(f, &e, nil); err != nil || e.Code != CodeAuth {
		t.Fatalf("ERROR %+v %v", e, err)
	}
}

func TestHandshakeVersionMismatch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = Server(context.Background(), nc, engineCfg(""), nil)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r, w := NewReader(nc, nil), NewWriter(nc)
	if err := w.Send(0, &Hello{Handshake{MinVersion: 7, MaxVersion: 9, Role: RoleRouter}}); err != nil {
		t.Fatal(err)
	}
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var e Error
	if err := DecodeFrame(f, &e, nil); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(e.AsError(0), ErrVersion) {
		t.Fatalf("got %+v", e)
	}
}

func TestHandshakeCheckRefusesBlockSize(t *testing.T) {
	cfg := routerCfg("")
	cfg.Check = func(p *Handshake) error {
		if p.BlockSize != 32 {
			return fmt.Errorf("block size %d, want 32", p.BlockSize)
		}
		return nil
	}
	d, _ := pair(t, cfg, engineCfg(""))
	if d.err == nil {
		t.Fatal("dialer accepted a block size its check refuses")
	}
}

// TestLoadSecret: the file wins over the environment; neither is no secret.
func TestLoadSecret(t *testing.T) {
	t.Setenv("KVGATE_TEST_SECRET", "from-env")
	if s, err := LoadSecret("KVGATE_TEST_SECRET", ""); err != nil || string(s) != "from-env" {
		t.Fatalf("env: %q %v", s, err)
	}
	f := t.TempDir() + "/secret"
	if err := os.WriteFile(f, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadSecret("KVGATE_TEST_SECRET", f); err != nil || string(s) != "from-file" {
		t.Fatalf("file: %q %v", s, err)
	}
	if s, err := LoadSecret("KVGATE_TEST_UNSET", ""); err != nil || s != nil {
		t.Fatalf("none: %q %v", s, err)
	}
	if _, err := LoadSecret("KVGATE_TEST_UNSET", f+".missing"); err == nil {
		t.Fatal("a missing file read")
	}
}
