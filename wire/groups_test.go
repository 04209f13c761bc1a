package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var hybridGroups = []Group{{Kind: GroupMamba, BlockSize: 16}, {Kind: GroupFull, BlockSize: 16},
	{Kind: GroupSlidingWindow, BlockSize: 32, Window: 128}}

// TestHandshakeGroups: an engine's groups reach a router whose HELLO asked
// for them, and an older router (no bit) gets the handshake it always got.
func TestHandshakeGroups(t *testing.T) {
	for _, asks := range []bool{true, false} {
		router, engine := routerCfg(""), engineCfg("")
		if asks {
			router.Local.Features |= FeatureHybridGroups
		}
		engine.Local.Groups = hybridGroups
		engine.Local.Features |= FeatureHybridGroups
		d, a := pair(t, router, engine)
		if d.err != nil || a.err != nil {
			t.Fatalf("asks %v: dialer %v, acceptor %v", asks, d.err, a.err)
		}
		got := d.conn.Peer
		if asks && (!reflect.DeepEqual(got.Groups, hybridGroups) || got.Features&FeatureHybridGroups == 0) {
			t.Fatalf("router that asks got groups %v, features %b", got.Groups, got.Features)
		}
		if !asks && (got.Groups != nil || got.Features&FeatureHybridGroups != 0) {
			t.Fatalf("router that did not ask got groups %v, features %b", got.Groups, got.Features)
		}
	}
}

// TestGroupsRefused: a WELCOME whose groups kvgate cannot honour is refused
// by the field's name.
func TestGroupsRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		block uint32
		gs    []Group
		want  string
	}{
		{"none", 16, []Group{}, "groups"},
		{"kind", 16, []Group{{Kind: 9, BlockSize: 16}}, "group kind 9"},
		{"block not a multiple", 16, []Group{{Kind: GroupFull, BlockSize: 24}}, "group block_size 24"},
		{"no hash block", 0, []Group{{Kind: GroupFull, BlockSize: 16}}, "group block_size 16"},
		{"window missing", 16, []Group{{Kind: GroupSlidingWindow, BlockSize: 16}}, "group window 0"},
		{"window on full", 16, []Group{{Kind: GroupFull, BlockSize: 16, Window: 64}}, "group window 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &Welcome{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleEngine, BlockSize: c.block,
				Features: FeatureHybridGroups, Groups: c.gs}}
			p, err := w.AppendPayload(nil)
			if err != nil {
				t.Fatal(err)
			}
			var got Welcome
			err = got.Decode(p, nil)
			if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decoding: %v, want ErrBadValue naming %q", err, c.want)
			}
		})
	}
	w := &Welcome{Handshake{MinVersion: 1, MaxVersion: 1, Role: RoleEngine, BlockSize: 16,
		Features: FeatureHybridGroups, Groups: make([]Group, MaxGroups+1)}}
	if _, err := w.AppendPayload(nil); !errors.Is(err, ErrLimit) {
		t.Fatalf("encoding %d groups: %v, want ErrLimit", MaxGroups+1, err)
	}
}
