package engine

import (
	"errors"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TestHandshakeProfile: what an engine announces is what Info, Features,
// Shape, Hasher, Serves and Resolve say, and what the index registers; and
// the router announces itself as a router that accepts compressed events.
func TestHandshakeProfile(t *testing.T) {
	type resolved struct {
		base string
		lora uint32
		ok   bool
	}
	full := ttHandshake("e-full")
	full.Models = []string{"base", "alt"}
	full.LoRAs = []wire.LoRA{{ID: 3, Name: "sql"}, {ID: 9, Name: "chat"}, {ID: 4, Name: "alt"}}
	full.Tiers = []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: 500}, {Tier: wire.TierCPU, Blocks: 2000}, {Tier: wire.TierDisk, Blocks: 9000}}
	full.Features = wire.FeatureLoadRequest | wire.FeatureText | wire.FeatureGuided
	full.BlockSize, full.HashSeed, full.MaxBatchedTokens, full.DPRanks = 32, 99, 2048, 2

	cases := []struct {
		name    string
		hs      wire.Handshake
		secret  string // shared by engine and router
		ranks   int
		resolve map[string]resolved
	}{
		{name: "one model", hs: ttHandshake("e-one"), ranks: 1, resolve: map[string]resolved{
			"m":       {"m", 0, true},
			"unknown": {"", 0, false},
			"":        {"", 0, false},
		}},
		{name: "shared secret", hs: ttHandshake("e-auth"), secret: "s3cret", ranks: 1, resolve: map[string]resolved{
			"m": {"m", 0, true},
		}},
		{name: "models, adapters, three tiers, two ranks", hs: full, ranks: 2, resolve: map[string]resolved{
			"base": {"base", 0, true},
			"alt":  {"alt", 0, true}, // a model wins over an adapter of the same name
			"sql":  {"base", 3, true},
			"chat": {"base", 9, true},
			"SQL":  {"", 0, false},
			"m":    {"", 0, false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := ttStartEngine(t, tc.hs, []byte(tc.secret))
			p, _ := ttPool(t, func(c *Config) { c.Secret = []byte(tc.secret) }, eng.addr)
			e := p.Engines()[0]
			c := eng.accept(t)
			ttReady(t, e)

			hello := c.Peer
			// wire's dialer adds FeatureTierCosts and FeatureContext itself: it reads a WELCOME's tier costs and context;
			// the pool reads ADAPTERS (adapters.go) and keeps KV cache groups apart (conn.go).
			if want := wire.FeatureS2 | wire.FeatureZstd | wire.FeatureTierCosts | wire.FeatureContext | wire.FeatureAdapters | wire.FeatureHybridGroups | wire.FeatureTokenBatch | wire.FeatureDisagg; hello.Role != wire.RoleRouter || hello.ID != "tt-router" || hello.Features != want {
				t.Errorf("router announced role %d id %q features %#x, want router \"tt-router\" s2|zstd|tier_costs|context",
					hello.Role, hello.ID, hello.Features)
			}

			got := e.Info()
			got.Nonce, got.Proof = [32]byte{}, [32]byte{}
			want := tc.hs
			want.MinVersion, want.MaxVersion = wire.MaxVersion, wire.MaxVersion
			want.AuthRequired, want.HasProof = tc.secret != "", tc.secret != ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Info() = %+v\nwant     %+v", got, want)
			}
			if e.Features() != tc.hs.Features {
				t.Errorf("Features() = %#x, want %#x", e.Features(), tc.hs.Features)
			}
			batched, capacity := e.Shape()
			if wantCap := float64(tc.hs.Capacity(wire.TierGPU)) * float64(tc.hs.BlockSize); batched != int(tc.hs.MaxBatchedTokens) || capacity != wantCap {
				t.Errorf("Shape() = %d, %v; want %d, %v", batched, capacity, tc.hs.MaxBatchedTokens, wantCap)
			}
			wantHasher, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: int(tc.hs.BlockSize), Seed: tc.hs.HashSeed, Model: tc.hs.Models[0]})
			if err != nil {
				t.Fatal(err)
			}
			if h := e.Hasher(); h == nil || h.BlockSize() != wantHasher.BlockSize() || h.Root() != wantHasher.Root() {
				t.Errorf("Hasher() = %+v, want block size %d root %#x", h, wantHasher.BlockSize(), wantHasher.Root())
			}
			for model, w := range tc.resolve {
				base, lora, ok := e.Resolve(model)
				if (resolved{base, lora, ok}) != w {
					t.Errorf("Resolve(%q) = %q, %d, %v; want %q, %d, %v", model, base, lora, ok, w.base, w.lora, w.ok)
				}
				if e.Serves(model) != w.ok {
					t.Errorf("Serves(%q) = %v, want %v", model, !w.ok, w.ok)
				}
				if wb, wl, wok := e.ResolveWire(model); string(wb) != w.base || wl != w.lora || wok != w.ok {
					t.Errorf("ResolveWire(%q) = %q, %d, %v; want %q, %d, %v", model, wb, wl, wok, w.base, w.lora, w.ok)
				}
			}

			slots, ok := p.Index().Slots(e.Addr)
			if !ok || len(slots) != tc.ranks {
				t.Fatalf("index slots of %s: %v (%v), want %d", e.Addr, slots, ok, tc.ranks)
			}
			if s, ok := e.Slot(); !ok || s != slots[0] {
				t.Errorf("Slot() = %d, %v; want rank 0's slot %d", s, ok, slots[0])
			}
			// No SNAPSHOT feature, so no SNAPSHOT_REQUEST: the first frame
			// the engine sees is our GENERATE.
			ttOpen(t, e, c)
		})
	}
}

// TestHandshakeSharedHasher: engines announcing the same scheme share one
// Hasher (a prompt is hashed once for all of them); another seed gets its own.
func TestHandshakeSharedHasher(t *testing.T) {
	a := ttStartEngine(t, ttHandshake("a"), nil)
	b := ttStartEngine(t, ttHandshake("b"), nil)
	other := ttHandshake("c")
	other.HashSeed++
	c := ttStartEngine(t, other, nil)
	p, _ := ttPool(t, nil, a.addr, b.addr, c.addr)
	for _, e := range p.Engines() {
		ttReady(t, e)
	}
	es := p.Engines()
	if es[0].Hasher() != es[1].Hasher() {
		t.Error("two engines of one hash scheme have two Hashers")
	}
	if es[0].Hasher() == es[2].Hasher() {
		t.Error("engines of different seeds share a Hasher")
	}
}

// TestBeforeHandshake: an engine that has not completed a handshake is
// connecting, serves nothing, takes no request and has no slot.
func TestBeforeHandshake(t *testing.T) {
	accepted := make(chan net.Conn, 1)
	var first atomic.Bool
	addr := ttListen(t, func(nc net.Conn) {
		if first.CompareAndSwap(false, true) {
			accepted <- nc // hold the first connection, answer nothing
		} else {
			nc.Close() // and refuse the retries, so Close never waits on a handshake
		}
	})
	p, _ := ttPool(t, nil, addr)
	e := p.Engines()[0]
	var nc net.Conn
	select {
	case nc = <-accepted:
	case <-time.After(ttWait):
		t.Fatal("the pool did not dial")
	}
	if e.State() != StateConnecting || e.Ready() {
		t.Errorf("mid-handshake: State() = %v, Ready() = %v; want connecting, false", e.State(), e.Ready())
	}
	if !reflect.DeepEqual(e.Info(), wire.Handshake{}) || e.Serves("m") || e.Hasher() != nil || e.Features() != 0 {
		t.Errorf("mid-handshake the engine has a profile: %+v", e.Info())
	}
	if _, ok := e.Slot(); ok {
		t.Error("mid-handshake the engine has an index slot")
	}
	if _, err := e.Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
		t.Errorf("Generate mid-handshake: %v, want ErrNotReady", err)
	}
	if l, seq, at := e.LoadReport(); l != nil || seq != 0 || !at.IsZero() {
		t.Errorf("LoadReport() before any LOAD = %v, %d, %v", l, seq, at)
	}
	nc.Close() // the handshake fails now, so Close need not wait for its timeout
	ttWaitFor(t, "down after the failed handshake", func() bool { return e.State() == StateDown })
}

// TestStateNames: each state's String, as logs and the admin API print it.
func TestStateNames(t *testing.T) {
	for _, tc := range []struct {
		s    State
		want string
	}{
		{StateConnecting, "connecting"},
		{StateReady, "ready"},
		{StateDraining, "draining"},
		{StateDown, "down"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.s.String(); got != tc.want {
				t.Errorf("State(%d).String() = %q, want %q", int(tc.s), got, tc.want)
			}
		})
	}
	t.Run("out of range", func(t *testing.T) {
		if got := State(4).String(); got == "" {
			t.Error("State(4).String() is empty")
		}
	})
}

// TestHandshakeRefused: every handshake the router must refuse, with the
// error it logs and the ERROR it sends the engine; a refused engine never
// becomes ready, has no profile and no slot.
func TestHandshakeRefused(t *testing.T) {
	withHS := func(mod func(*wire.Handshake)) wire.Handshake {
		hs := ttHandshake("bad")
		mod(&hs)
		return hs
	}
	cases := []struct {
		name                       string
		hs                         wire.Handshake
		engineSecret, routerSecret string
		// welcome, when set, scripts the engine's answer to HELLO instead.
		welcome func(*wire.Hello) wire.Message
		// lost is the sentinel the router's error matches; nil where the
		// router's refusal wraps none (checkEngine's refusals).
		lost error
		// remote: the router's error is the engine's ERROR frame.
		remote bool
		// code is the ERROR the engine receives (0: the engine refused first).
		code wire.ErrorCode
		// engineLost is the sentinel of the engine side's own failure.
		engineLost error
	}{
		{name: "wrong secret", hs: ttHandshake("e"), engineSecret: "engine-secret", routerSecret: "router-secret",
			lost: wire.ErrAuth, engineLost: wire.ErrAuth},
		{name: "engine wants a secret, router has none", hs: ttHandshake("e"), engineSecret: "engine-secret",
			lost: wire.ErrAuth, engineLost: wire.ErrAuth},
		{name: "router wants proof, engine has no secret", hs: ttHandshake("e"), routerSecret: "router-secret",
			lost: wire.ErrAuth, code: wire.CodeAuth},
		{name: "role router", hs: withHS(func(h *wire.Handshake) { h.Role = wire.RoleRouter }), code: wire.CodeHashScheme},
		{name: "role peer", hs: withHS(func(h *wire.Handshake) { h.Role = wire.RolePeer }), code: wire.CodeHashScheme},
		{name: "hash scheme none", hs: withHS(func(h *wire.Handshake) { h.HashScheme = 0 }), code: wire.CodeHashScheme},
		{name: "hash scheme 2", hs: withHS(func(h *wire.Handshake) { h.HashScheme = 2 }), code: wire.CodeHashScheme},
		{name: "block size 0", hs: withHS(func(h *wire.Handshake) { h.BlockSize = 0 }), code: wire.CodeHashScheme},
		{name: "block size over the maximum", hs: withHS(func(h *wire.Handshake) { h.BlockSize = kvstore.MaxBlockSize + 1 }), code: wire.CodeHashScheme},
		{name: "no model", hs: withHS(func(h *wire.Handshake) { h.Models = nil }), code: wire.CodeHashScheme},
		{name: "engine chose version 2", welcome: func(*wire.Hello) wire.Message {
			w := &wire.Welcome{Handshake: ttHandshake("v2")}
			w.MinVersion, w.MaxVersion = 2, 2
			return w
		}, lost: wire.ErrVersion, code: wire.CodeVersion},
		{name: "engine speaks no common version", welcome: func(h *wire.Hello) wire.Message {
			return &wire.Error{Code: wire.CodeVersion, Message: "engine speaks 2..2"}
		}, lost: wire.ErrVersion, remote: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			var verdict func(t *testing.T) (code wire.ErrorCode, engineErr error)
			if tc.welcome != nil {
				addr, verdict = ttScriptedEngine(t, tc.welcome)
			} else {
				eng := ttStartEngine(t, tc.hs, []byte(tc.engineSecret))
				addr, verdict = eng.addr, eng.verdict
			}
			p, lg := ttPool(t, func(c *Config) { c.Secret = []byte(tc.routerSecret) }, addr)
			e := p.Engines()[0]

			err := lg.firstLoss(t)
			if tc.lost != nil && !errors.Is(err, tc.lost) {
				t.Errorf("router's error %q is not %v", err, tc.lost)
			}
			var re *wire.RemoteError
			if errors.As(err, &re) != tc.remote {
				t.Errorf("router's error %q: remote %v, want %v", err, !tc.remote, tc.remote)
			}
			code, engineErr := verdict(t)
			if code != tc.code {
				t.Errorf("engine received ERROR %v, want %v", code, tc.code)
			}
			if !ttErrIs(engineErr, tc.engineLost) {
				t.Errorf("engine side's failure %v, want %v", engineErr, tc.engineLost)
			}
			if e.Ready() || e.State() == StateDraining {
				t.Errorf("refused engine is %v", e.State())
			}
			if e.Info().ID != "" || e.Serves("m") || e.Hasher() != nil {
				t.Errorf("refused engine has a profile: %+v", e.Info())
			}
			if _, ok := p.Index().Slots(e.Addr); ok {
				t.Error("refused engine is in the index")
			}
		})
	}
}

// verdict is what the engine side saw of the first, refused, handshake:
// the ERROR the router sent after it, or its own handshake failure.
func (e *ttEngine) verdict(t *testing.T) (wire.ErrorCode, error) {
	t.Helper()
	select {
	case err := <-e.refused:
		return 0, err
	case c := <-e.accepted:
		fs := c.hangup(t)
		if len(fs) != 1 || fs[0].Type != wire.TypeError || fs[0].Stream != 0 {
			t.Fatalf("router sent %d frames before hanging up, want one ERROR on stream 0", len(fs))
		}
		var m wire.Error
		if err := wire.DecodeFrame(fs[0], &m, nil); err != nil {
			t.Fatal(err)
		}
		return m.Code, nil
	case <-time.After(ttWait):
		t.Fatal("no handshake reached the engine")
	}
	return 0, nil
}

// ttScriptedEngine answers each HELLO with welcome(hello) and reports, for
// the first connection, the ERROR the router sent next (0 if none).
func ttScriptedEngine(t *testing.T, welcome func(*wire.Hello) wire.Message) (string, func(*testing.T) (wire.ErrorCode, error)) {
	codes := make(chan wire.ErrorCode, 1)
	addr := ttListen(t, func(nc net.Conn) {
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(ttWait))
		r, w := wire.NewReader(nc, nil), wire.NewWriter(nc)
		var code wire.ErrorCode
		defer func() {
			select {
			case codes <- code:
			default:
			}
		}()
		f, err := r.ReadFrame()
		var hello wire.Hello
		if err != nil || wire.DecodeFrame(f, &hello, nil) != nil {
			return
		}
		if err := w.Send(0, welcome(&hello)); err != nil {
			return
		}
		if f, err = r.ReadFrame(); err != nil {
			return
		}
		var m wire.Error
		if wire.DecodeFrame(f, &m, nil) == nil && f.Stream == 0 {
			code = m.Code
		}
	})
	return addr, func(t *testing.T) (wire.ErrorCode, error) {
		t.Helper()
		select {
		case c := <-codes:
			return c, nil
		case <-time.After(ttWait):
			t.Fatal("no handshake reached the engine")
		}
		return 0, nil
	}
}

// TestPoolClose: Close returns, every engine is down, and streams open
// then end with ErrEngineDown.
func TestPoolClose(t *testing.T) {
	eng := ttStartEngine(t, ttHandshake("e"), nil)
	p, _ := ttPool(t, nil, eng.addr, ttDeadAddr(t)) // the second refuses: down, retrying
	ttReady(t, p.Engines()[0])
	c := eng.accept(t)
	s, _ := ttOpen(t, p.Engines()[0], c)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(ttWait):
		t.Fatal("Close did not return")
	}
	for _, e := range p.Engines() {
		if e.State() != StateDown {
			t.Errorf("%s after Close: %v, want down", e.Addr, e.State())
		}
	}
	if evs := ttCollect(t, s); !errors.Is(evs[len(evs)-1].Err, ErrEngineDown) {
		t.Errorf("stream open at Close: %+v", evs)
	}
	c.hangup(t)
	if _, err := p.Engines()[0].Generate(ttGenerate("m")); !errors.Is(err, ErrNotReady) {
		t.Errorf("Generate after Close: %v, want ErrNotReady", err)
	}
}
