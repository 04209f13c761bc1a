package sim

import (
	"context"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestServerLoRASlots: with one slot, a request for adapter 3 waits for
// its load, the engine announces it (LOADED, with the load time) to a
// router that reads ADAPTERS, then a request for adapter 4 evicts it
// (EVICTED, LOADED); a snapshot request is answered with the ranks'
// residency first. A router that does not read ADAPTERS meets none.
func TestServerLoRASlots(t *testing.T) {
	_, addr := startServer(t, func(c *Config) {
		c.LoRAs = []wire.LoRA{{ID: 3, Name: "sql"}, {ID: 4, Name: "chat"}}
		c.MaxLoRAs, c.LoRALoadTime = 1, 20*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r", Features: wire.FeatureAdapters}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.NetConn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if c.Peer.Features&wire.FeatureAdapters == 0 {
		t.Fatal("WELCOME without FeatureAdapters")
	}
	old := dialRouter(t, addr, "")
	if old.Peer.Features&wire.FeatureAdapters != 0 {
		t.Fatal("a router that reads no ADAPTERS was told the engine sends them")
	}
	var got []wire.Adapters
	var snap bool
	// next reads frames until stream's last TOKENS, keeping ADAPTERS.
	next := func(stream uint32) {
		t.Helper()
		for {
			f, err := c.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case wire.TypeAdapters:
				var m wire.Adapters
				if err := wire.DecodeFrame(f, &m, nil); err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			case wire.TypeSnapshot:
				snap = true
			case wire.TypeTokens:
				var m wire.TokensMsg
				if err := wire.DecodeFrame(f, &m, nil); err != nil {
					t.Fatal(err)
				}
				if f.Stream == stream && m.Flags&wire.TokLast != 0 {
					return
				}
			case wire.TypeError:
				t.Fatalf("ERROR on stream %d", f.Stream)
			}
		}
	}
	if err := c.Send(0, &wire.SnapshotRequest{SnapshotID: 1}); err != nil {
		t.Fatal(err)
	}
	g := generate([]uint32{1, 2, 3, 4}, 2)
	g.LoRAID = 3
	if err := c.Send(1, g); err != nil {
		t.Fatal(err)
	}
	next(1)
	g.LoRAID = 4
	if err := c.Send(3, g); err != nil {
		t.Fatal(err)
	}
	next(3)
	want := []struct {
		change wire.AdapterChange
		id     uint32
	}{{wire.AdaptersResident, 0}, {wire.AdaptersLoaded, 3}, {wire.AdaptersEvicted, 3}, {wire.AdaptersLoaded, 4}}
	if len(got) != len(want) || !snap {
		t.Fatalf("ADAPTERS frames %+v (snapshot %v), want %+v", got, snap, want)
	}
	for i, w := range want {
		m := got[i]
		if m.Change != w.change || m.Slots != 1 || w.id != 0 && (len(m.LoRAs) != 1 || m.LoRAs[0].ID != w.id) {
			t.Fatalf("frame %d: %+v, want %v of %d", i, m, w.change, w.id)
		}
		if m.Change == wire.AdaptersLoaded && m.LoadNanos != uint64(20*time.Millisecond) {
			t.Fatalf("load time %d", m.LoadNanos)
		}
	}
	if got[0].Change == wire.AdaptersResident && len(got[0].LoRAs) != 0 {
		t.Fatalf("resident before any request: %+v", got[0].LoRAs)
	}
}
