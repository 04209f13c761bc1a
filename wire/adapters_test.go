package wire

import (
	"errors"
	"testing"
)

func FuzzAdapters(f *testing.F) { fuzzMessage(f, TypeAdapters) }

func TestAdaptersRefuses(t *testing.T) {
	good := Adapters{Change: AdaptersLoaded, Slots: 4, LoadNanos: 5, LoRAs: []LoRA{{ID: 3, Name: "a"}}}
	p, err := good.AppendPayload(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"unknown change", func(b []byte) []byte { b[2] = 4; return b }, ErrBadValue},
		{"reserved byte", func(b []byte) []byte { b[3] = 1; return b }, ErrBadValue},
		{"base model listed", func(b []byte) []byte { b[24] = 0; return b }, ErrBadValue},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"trailing", func(b []byte) []byte { return append(b, 0) }, ErrTrailingBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m Adapters
			if err := m.Decode(c.edit(append([]byte(nil), p...)), nil); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	var m Adapters
	if err := m.Decode(p, nil); err != nil || m.LoRAs[0] != good.LoRAs[0] || m.LoadNanos != 5 || m.Slots != 4 {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
	if s := AdaptersEvicted.String(); s != "evicted" {
		t.Fatalf("name %q", s)
	}
}

// TestAdaptersFeatureOnlyToDialersThatReadIt: an engine announcing
// FeatureAdapters keeps the bit in its WELCOME only for a router whose
// HELLO set it.
func TestAdaptersFeatureOnlyToDialersThatReadIt(t *testing.T) {
	for _, reads := range []bool{false, true} {
		rc, ec := routerCfg(""), engineCfg("")
		ec.Local.Features |= FeatureAdapters
		if reads {
			rc.Local.Features |= FeatureAdapters
		}
		d, a := pair(t, rc, ec)
		if d.err != nil || a.err != nil {
			t.Fatal(d.err, a.err)
		}
		if got := d.conn.Peer.Features&FeatureAdapters != 0; got != reads {
			t.Fatalf("router reads ADAPTERS %v: WELCOME has the bit %v", reads, got)
		}
	}
}
