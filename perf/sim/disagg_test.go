package sim

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// dialDisagg connects as a router that announces the hand-off.
func dialDisagg(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r",
		Features: wire.FeatureDisagg}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c
}

func startRole(t *testing.T, id string, role wire.EngineRole, mod func(*Config)) (*Server, *wire.Conn) {
	s, addr := startServer(t, func(c *Config) {
		c.ID, c.Rank.Disagg.Role = id, role
		c.Rank.Profile, c.Speed = DefaultProfile, 50 // KV has a size: transfers take time
		if mod != nil {
			mod(c)
		}
	})
	return s, dialDisagg(t, addr)
}

// readHandoff reads stream's first frame, which must be a hand-off.
func readHandoff(t *testing.T, c *wire.Conn, stream uint32) wire.TokensMsg {
	t.Helper()
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Stream != stream {
			continue
		}
		var m wire.TokensMsg
		if f.Type != wire.TypeTokens {
			t.Fatalf("%s on stream %d, want a hand-off", f.Type, stream)
		}
		must(t, wire.DecodeFrame(f, &m, nil))
		m.Tokens = wire.TokensOf(m.Tokens.AppendTo(nil))
		m.KVTransfer = append([]byte(nil), m.KVTransfer...)
		return m
	}
}

func handoffGen(prompt []uint32, maxTokens uint32, side wire.HandoffSide, peer string, params []byte) *wire.Generate {
	g := generate(prompt, maxTokens)
	g.Flags |= wire.GenHandoff
	g.KVTransfer = params
	g.Handoff = wire.Handoff{Side: side, DeadlineMillis: 10_000, Peer: []byte(peer)}
	return g
}

func ramp(n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(i + 7)
	}
	return p
}

// TestDisaggHandoff runs one request across a prefill and a decode
// engine: one first token, the rest from decode, the transferred blocks
// announced and served from cache by a later turn, the prefill side
// released by CANCEL.
func TestDisaggHandoff(t *testing.T) {
	_, pc := startRole(t, "prefill-0", wire.RolePrefill, nil)
	ds, dc := startRole(t, "decode-0", wire.RoleDecode, nil)
	if r, err := wire.RoleOf(pc.Peer.Features); err != nil || r != wire.RolePrefill {
		t.Fatalf("prefill engine announces %v, %v", r, err)
	}
	prompt := ramp(100)
	must(t, pc.Send(1, handoffGen(prompt, 20, wire.HandoffPrefill, "decode-0", nil)))
	h := readHandoff(t, pc, 1)
	if !h.First() || h.Last() || h.Flags&wire.TokHandoff == 0 || h.Tokens.Len() != 1 {
		t.Fatalf("hand-off frame %+v", h)
	}
	var p transferParams
	must(t, json.Unmarshal(h.KVTransfer, &p))
	if p.Engine != "prefill-0" || p.Blocks != 100/16 || p.Bytes != float64(p.Blocks)*16*DefaultProfile.KVBytesPerToken {
		t.Fatalf("params %+v", p)
	}
	dprompt := append(append([]uint32(nil), prompt...), h.Tokens.At(0))
	must(t, dc.Send(1, handoffGen(dprompt, 19, wire.HandoffDecode, "prefill-0", h.KVTransfer)))
	others := map[wire.Type]int{}
	msgs, e := readStream(t, dc, 1, others)
	if e != nil {
		t.Fatalf("decode: %+v", e)
	}
	n := 0
	for _, m := range msgs {
		n += m.Tokens.Len()
	}
	if n != 19 || msgs[0].CachedTokens != uint32(p.Blocks*16) || msgs[len(msgs)-1].PromptTokens != 101 {
		t.Fatalf("decode gave %d tokens, first %+v, last %+v", n, msgs[0], msgs[len(msgs)-1])
	}
	ds.ranks[0].mu.Lock()
	st := ds.ranks[0].core.Stats()
	ds.ranks[0].mu.Unlock()
	if st.TransferredBlocks != p.Blocks {
		t.Fatalf("decode engine received %d blocks, want %d", st.TransferredBlocks, p.Blocks)
	}
	must(t, pc.Send(1, &wire.Cancel{Reason: wire.CancelRerouted}))
	last, e := readStream(t, pc, 1, map[wire.Type]int{})
	if e != nil || len(last) != 1 || last[0].Finish != wire.FinishCancelled {
		t.Fatalf("prefill release: %+v %+v", last, e)
	}
	// A later turn on the decode engine finds the transferred prefix.
	must(t, dc.Send(3, generate(dprompt, 2)))
	msgs, _ = readStream(t, dc, 3, others)
	if msgs[0].CachedTokens < uint32(p.Blocks*16) || others[wire.TypeKVEvents] == 0 {
		t.Fatalf("later turn cached %d tokens; %d KV_EVENTS frames", msgs[0].CachedTokens, others[wire.TypeKVEvents])
	}
}

// TestDisaggExpiry: a prefill side the router never releases is freed at
// its deadline (finish abort).
func TestDisaggExpiry(t *testing.T) {
	_, pc := startRole(t, "prefill-0", wire.RolePrefill, nil)
	g := handoffGen(ramp(40), 8, wire.HandoffPrefill, "decode-0", nil)
	g.Handoff.DeadlineMillis = 20
	must(t, pc.Send(5, g))
	readHandoff(t, pc, 5)
	last, e := readStream(t, pc, 5, map[wire.Type]int{})
	if e != nil || len(last) != 1 || last[0].Finish != wire.FinishAbort {
		t.Fatalf("expiry: %+v %+v", last, e)
	}
}

// TestDisaggRefused: each request an engine's role cannot take is refused
// by name, and a transfer that cannot arrive in time fails the stream.
func TestDisaggRefused(t *testing.T) {
	_, pc := startRole(t, "prefill-0", wire.RolePrefill, nil)
	_, dc := startRole(t, "decode-0", wire.RoleDecode, func(c *Config) {
		c.Rank.Disagg.Link = TierLink{GBps: 1e-6, Latency: time.Hour} // never in time
	})
	_, bc := startRole(t, "both-0", wire.RoleBoth, nil)
	params, _ := json.Marshal(transferParams{Engine: "prefill-0", Blocks: 2})
	for i, c := range []struct {
		c    *wire.Conn
		g    *wire.Generate
		code wire.ErrorCode
	}{
		{pc, generate(ramp(40), 4), wire.CodeBadRequest},
		{dc, handoffGen(ramp(40), 4, wire.HandoffPrefill, "x", nil), wire.CodeBadRequest},
		{bc, handoffGen(ramp(40), 4, wire.HandoffPrefill, "x", nil), wire.CodeBadRequest},
		{dc, handoffGen(ramp(40), 4, wire.HandoffDecode, "prefill-1", params), wire.CodeBadRequest},
		{dc, handoffGen(ramp(40), 4, wire.HandoffDecode, "prefill-0", []byte("{")), wire.CodeBadRequest},
		{dc, handoffGen(ramp(40), 4, wire.HandoffDecode, "prefill-0", params), wire.CodeStreamFailed},
	} {
		stream := uint32(2*i + 1)
		must(t, c.c.Send(stream, c.g))
		msgs, e := readStream(t, c.c, stream, map[wire.Type]int{})
		if e == nil || e.Code != c.code || len(msgs) != 0 {
			t.Errorf("case %d: %+v, error %+v; want %v", i, msgs, e, c.code)
		}
	}
	// A router without DISAGG in its HELLO gets no hand-off.
	rc := dialRouter(t, pc.NetConn.RemoteAddr().String(), "")
	must(t, rc.Send(1, handoffGen(ramp(40), 4, wire.HandoffPrefill, "d", nil)))
	if _, e := readStream(t, rc, 1, map[wire.Type]int{}); e == nil || e.Code != wire.CodeBadRequest {
		t.Fatalf("router without DISAGG: %+v", e)
	}
}
