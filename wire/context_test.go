package wire

import (
	"reflect"
	"testing"
)

func contextEngineCfg(withTiers bool) *HandshakeConfig {
	cfg := engineCfg("")
	if withTiers {
		cfg = tierEngineCfg()
	}
	cfg.Local.MaxModelLen = 32768
	return cfg
}

// TestContextReachesRouter: a router of this package reads an engine's
// context from its WELCOME, alone and after the tier costs; an engine that
// says nothing claims nothing.
func TestContextReachesRouter(t *testing.T) {
	for _, withTiers := range []bool{false, true} {
		d, a := pair(t, routerCfg(""), contextEngineCfg(withTiers))
		if d.err != nil || a.err != nil {
			t.Fatal(d.err, a.err)
		}
		got := d.conn.Peer
		if got.Features&FeatureContext == 0 || got.MaxModelLen != 32768 {
			t.Fatalf("tiers %v: router sees features %#x, max_model_len %d", withTiers, got.Features, got.MaxModelLen)
		}
		if withTiers && !reflect.DeepEqual(got.TierCosts, testTierCosts) {
			t.Fatalf("tier costs before the context section: %+v", got.TierCosts)
		}
	}
	d, a := pair(t, routerCfg(""), engineCfg(""))
	if d.err != nil || a.err != nil || d.conn.Peer.Features&FeatureContext != 0 || d.conn.Peer.MaxModelLen != 0 {
		t.Fatalf("%v %v features %#x max_model_len %d", d.err, a.err, d.conn.Peer.Features, d.conn.Peer.MaxModelLen)
	}
}

// TestContextOnlyToDialersThatReadIt: a dialer from before the section gets
// a WELCOME it decodes with the plain layout (no trailing bytes).
func TestContextOnlyToDialersThatReadIt(t *testing.T) {
	if asOld := welcomeToOldDialer(t, contextEngineCfg(true)); asOld.Features&(FeatureContext|FeatureTierCosts) != 0 {
		t.Fatalf("WELCOME claims optional sections to a dialer that did not ask: %#x", asOld.Features)
	}
}

func TestContextDecodeErrors(t *testing.T) {
	w := Welcome{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleEngine, ID: "e", Features: FeatureContext, MaxModelLen: 4096}}
	p, err := w.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Welcome
	if err := back.Decode(p, nil); err != nil || back.MaxModelLen != 4096 {
		t.Fatalf("%v %d", err, back.MaxModelLen)
	}
	for name, b := range map[string][]byte{
		"truncated": p[:len(p)-1],
		"reserved":  append(append([]byte(nil), p[:len(p)-1]...), 1),
	} {
		if err := back.Decode(b, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
