package wire

import (
	"net"
	"reflect"
	"testing"
)

var testTierCosts = TierCosts{BlockBytes: 2359296, Links: []TierLink{
	{Tier: TierCPU, LatencyNanos: 10_000, BytesPerSecond: 25_000_000_000},
	{Tier: TierDisk, LatencyNanos: 100_000, BytesPerSecond: 7_450_000_000},
}}

func tierEngineCfg() *HandshakeConfig {
	cfg := engineCfg("")
	cfg.Local.Tiers = []TierCapacity{{TierGPU, 1000}, {TierCPU, 4000}, {TierDisk, 16000}}
	cfg.Local.TierCosts = testTierCosts
	return cfg
}

// TestTierCostsReachRouter: a router of this package reads an engine's tier
// costs from its WELCOME.
func TestTierCostsReachRouter(t *testing.T) {
	d, a := pair(t, routerCfg(""), tierEngineCfg())
	if d.err != nil || a.err != nil {
		t.Fatal(d.err, a.err)
	}
	if got := d.conn.Peer; got.Features&FeatureTierCosts == 0 || !reflect.DeepEqual(got.TierCosts, testTierCosts) {
		t.Fatalf("router sees features %#x, tier costs %+v", got.Features, got.TierCosts)
	}
	if l, ok := d.conn.Peer.TierCosts.Link(TierDisk); !ok || l.BytesPerSecond != 7_450_000_000 {
		t.Fatalf("disk link %+v %v", l, ok)
	}
	// An engine with no costs to announce does not claim the feature.
	d, a = pair(t, routerCfg(""), engineCfg(""))
	if d.err != nil || a.err != nil || d.conn.Peer.Features&FeatureTierCosts != 0 {
		t.Fatalf("%v %v features %#x", d.err, a.err, d.conn.Peer.Features)
	}
}

// TestTierCostsOnlyToDialersThatReadThem: a dialer from before the section
// (no FeatureTierCosts in its HELLO) gets a WELCOME without it, which a
// decoder that knows nothing of the section (the HELLO layout: no trailing
// bytes allowed) accepts.
func TestTierCostsOnlyToDialersThatReadThem(t *testing.T) {
	if asOld := welcomeToOldDialer(t, tierEngineCfg()); asOld.Features&FeatureTierCosts != 0 {
		t.Fatalf("WELCOME claims tier costs to a dialer that did not ask: %#x", asOld.Features)
	}
}

// welcomeToOldDialer runs an acceptor of cfg against a dialer from before
// any optional WELCOME section (its HELLO sets no feature bit) and returns
// the WELCOME decoded as such a dialer's code would: with the HELLO
// layout, which allows no trailing bytes.
func welcomeToOldDialer(t *testing.T, cfg *HandshakeConfig) Hello {
	t.Helper()
	dc, ac := net.Pipe()
	defer dc.Close()
	defer ac.Close()
	done := make(chan error, 1)
	go func() {
		_, err := AcceptHandshake(NewReader(ac, nil), NewWriter(ac), cfg)
		done <- err
	}()
	old := Hello{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleRouter, ID: "old-router", Nonce: NewNonce()}}
	if err := NewWriter(dc).Send(0, &old); err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(dc, nil).ReadFrame()
	if err != nil || f.Type != TypeWelcome {
		t.Fatalf("%v %s", err, f.Type)
	}
	var asOld Hello
	if err := asOld.Decode(f.Payload, nil); err != nil {
		t.Fatalf("an old dialer refuses the WELCOME: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return asOld
}

func TestTierCostsDecodeErrors(t *testing.T) {
	w := Welcome{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleEngine, ID: "e", Features: FeatureTierCosts, TierCosts: testTierCosts}}
	p, err := w.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Welcome
	if err := back.Decode(p, nil); err != nil || !reflect.DeepEqual(back.TierCosts, testTierCosts) {
		t.Fatalf("%v %+v", err, back.TierCosts)
	}
	linkAt := len(p) - 2*16 // the first link's tier byte
	for name, mutate := range map[string]func(b []byte){
		"truncated":      func(b []byte) {},
		"tier 3":         func(b []byte) { b[linkAt] = 3 },
		"reserved":       func(b []byte) { b[linkAt+1] = 1 },
		"four links":     func(b []byte) { b[linkAt-8] = 4 },
		"count reserved": func(b []byte) { b[linkAt-7] = 1 },
	} {
		b := append([]byte(nil), p...)
		mutate(b)
		if name == "truncated" {
			b = b[:len(b)-1]
		}
		if err := back.Decode(b, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
