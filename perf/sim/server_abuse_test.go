package sim

import (
	"net"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestServerRefusesRequestKeepsStreams: a GENERATE with more stop tokens
// than the engine takes, or a prompt over its limit, fails only its own
// stream (REQUEST_LIMIT); streams already running on the connection finish.
func TestServerRefusesRequestKeepsStreams(t *testing.T) {
	_, addr := startServer(t, func(c *Config) { c.Limits.MaxTokens = 64 })
	c := dialRouter(t, addr, "")
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	for _, st := range []uint32{1, 3} {
		if err := c.Send(st, generate(prompt, 32)); err != nil {
			t.Fatal(err)
		}
	}
	stops := generate(prompt, 4)
	stops.StopTokens = wire.TokensOf(make([]uint32, wire.DefaultMaxStopTokens+1))
	long := generate(make([]uint32, 65), 4)
	for st, g := range map[uint32]*wire.Generate{5: stops, 7: long} {
		if err := c.Send(st, g); err != nil {
			t.Fatal(err)
		}
	}
	ended := map[uint32]string{} // stream -> how it ended
	for len(ended) < 4 {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("reading (ended so far %v): %v", ended, err)
		}
		switch f.Type {
		case wire.TypeTokens:
			var m wire.TokensMsg
			must(t, wire.DecodeFrame(f, &m, nil))
			if m.Last() {
				ended[f.Stream] = "last"
			}
		case wire.TypeError:
			var e wire.Error
			must(t, wire.DecodeFrame(f, &e, nil))
			ended[f.Stream] = e.Code.String()
		}
	}
	want := map[uint32]string{1: "last", 3: "last", 5: "request_limit", 7: "request_limit"}
	for st, how := range want {
		if ended[st] != how {
			t.Errorf("stream %d ended %q, want %q (all: %v)", st, ended[st], how, ended)
		}
	}
}

// TestServerSilentRoutersBounded: routers that never finish a handshake
// are held MaxHandshakes at a time; a real one still connects.
func TestServerSilentRoutersBounded(t *testing.T) {
	s, addr := startServer(t, func(c *Config) { c.MaxHandshakes = 2; c.HandshakeTimeout = time.Hour })
	for range 10 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.srv.Handshaking() > 2 || s.srv.Routers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshaking, want at most 2", s.srv.Handshaking())
		}
		time.Sleep(time.Millisecond)
	}
	c := dialRouter(t, addr, "")
	if err := c.Send(1, generate([]uint32{1, 2, 3}, 2)); err != nil {
		t.Fatal(err)
	}
	if msgs, e := readStream(t, c, 1, map[wire.Type]int{}); e != nil || len(msgs) == 0 {
		t.Fatalf("router among silent ones: %d frames, %+v", len(msgs), e)
	}
}
