//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Helpers of abuse_wire_test.go: hostile wire peers, a router's raw
// connection to an engine, and what kvgate's admin says of its engines.

// wireFloodRSS bounds what a flood of unauthenticated peers may add to a
// listener's RSS: at most 64 handshakes are held (wire.DefaultMaxHandshakes)
// at about 1 KiB of buffer, a goroutine and a socket each, and a HELLO
// announced over 65,690 bytes is refused on its header. Measured: this
// flood grows kvgate-sim by about 2.5 MiB; before the bound (9325c7d),
// whose handshake read 16 MiB frames into a 64 KiB buffer that doubled as
// bytes came, it grew it by 111 MiB.
const wireFloodRSS = 32 << 20

// floodWire opens silent and half-HELLO connections to addr and returns
// how many of all but the newest 64 the listener closed (EOF or reset).
func floodWire(t *testing.T, addr string) (closed int) {
	t.Helper()
	var socks []net.Conn
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flooding %s: %v", addr, err)
		}
		t.Cleanup(func() { nc.Close() })
		socks = append(socks, nc)
		return nc
	}
	big := make([]byte, 1<<20)
	for range 60 { // 16 MiB announced, 1 MiB sent: refused on the header now
		nc := dial()
		_, _ = nc.Write(wire.AppendHeader(nil, wire.TypeHello, 0, 0, wire.DefaultMaxFrameSize))
		_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = nc.Write(big)
	}
	for i := range 300 { // silent, or a HELLO of the largest size with four bytes of it
		nc := dial()
		if i%2 == 1 {
			_, _ = nc.Write(append(wire.AppendHeader(nil, wire.TypeHello, 0, 0, wire.MaxHandshakeFrame), "KVGW"...))
		}
	}
	// At most 64 of the 360 stay open: the rest are closed, oldest first,
	// as the newer ones arrive; within 4 s, before any handshake timeout
	// (5 s on the ring, 10 s on engines) could have closed them instead.
	buf := make([]byte, 4096)
	deadline := time.Now().Add(4 * time.Second)
	for _, nc := range socks[:len(socks)-64] {
		_ = nc.SetReadDeadline(deadline)
		for {
			if _, err := nc.Read(buf); err != nil {
				var ne net.Error
				if !(errors.As(err, &ne) && ne.Timeout()) {
					closed++
				}
				break
			}
		}
	}
	return closed
}

// dialWireRouter is a router's connection to a wire engine.
func dialWireRouter(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "e2e-router"}}, nil)
	if err != nil {
		t.Fatalf("a router connecting to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(90 * time.Second))
	return c
}

func wireGenerate(prompt []uint32, maxTokens uint32) *wire.Generate {
	return &wire.Generate{RequestID: []byte("e2e"), Model: []byte(model), MaxTokens: maxTokens, TopP: 1,
		Flags: wire.GenIgnoreEOS, DPRank: wire.AnyRank, Prompt: wire.TokensOf(prompt)}
}

// readEnds reads frames until every stream in want has ended and returns
// how each did: "last" or its ERROR code's name.
func readEnds(t *testing.T, c *wire.Conn, want ...uint32) map[uint32]string {
	t.Helper()
	ended := map[uint32]string{}
	for len(ended) < len(want) {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("the connection failed (streams ended so far: %v): %v", ended, err)
		}
		switch f.Type {
		case wire.TypeTokens:
			var m wire.TokensMsg
			if wire.DecodeFrame(f, &m, nil) == nil && m.Last() {
				ended[f.Stream] = "last"
			}
		case wire.TypeError:
			var e wire.Error
			if err := wire.DecodeFrame(f, &e, nil); err != nil || f.Stream == 0 {
				t.Fatalf("connection ERROR %+v (%v)", e, err)
			}
			ended[f.Stream] = e.Code.String()
		}
	}
	return ended
}

// wireEngine is what these tests read of an engine in /debug/state.
type wireEngine struct {
	ID, State string
	Inflight  struct{ Requests int64 }
}

// engineInfo reads each wire engine (by handshake id) from kvgate's
// /debug/state.
func engineInfo(admin string) (map[string]wireEngine, error) {
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	var st struct {
		Engines []wireEngine `json:"engines"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return nil, err
	}
	out := map[string]wireEngine{}
	for _, e := range st.Engines {
		out[e.ID] = e
	}
	return out, nil
}

// engineStates is each wire engine's state, by handshake id.
func engineStates(admin string) (map[string]string, error) {
	info, err := engineInfo(admin)
	out := map[string]string{}
	for id, e := range info {
		out[id] = e.State
	}
	return out, err
}

// readyStatus is kvgate's /ready status code.
func readyStatus(t *testing.T, base string) int {
	t.Helper()
	r, err := http.Get(base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}
