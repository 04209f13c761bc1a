package sim

import (
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// TestServerTierEvents: over the wire, a router's index built from the
// engine's KV_EVENTS holds exactly what each of its three tiers holds
// after prompts pushed blocks from the GPU into CPU memory and onto disk,
// as does a snapshot's; the WELCOME announces every tier and its link, and
// LOAD reports each tier's use.
func TestServerTierEvents(t *testing.T) {
	s, addr := startServer(t, func(c *Config) {
		c.Rank.GPUBlocks, c.Rank.CPUBlocks, c.Rank.DiskBlocks = 16, 16, 64
		c.Rank.Profile.KVBytesPerToken = 1024
	})
	r := dialRouter(t, addr, "")
	wantCap := []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: 16}, {Tier: wire.TierCPU, Blocks: 16}, {Tier: wire.TierDisk, Blocks: 64}}
	if got := r.Peer.Tiers; len(got) != 3 || got[0] != wantCap[0] || got[1] != wantCap[1] || got[2] != wantCap[2] {
		t.Fatalf("WELCOME tiers %+v, want %+v", got, wantCap)
	}
	if tc := r.Peer.TierCosts; tc.BlockBytes != 1024*uint64(s.cfg.Rank.BlockSize) || len(tc.Links) != 2 || tc.Links[0].Tier != wire.TierCPU || tc.Links[1].Tier != wire.TierDisk {
		t.Fatalf("WELCOME tier costs %+v, want block bytes and the CPU and disk links", tc)
	}
	view := newEngineView(t)
	must(t, r.Send(0, &wire.LoadRequest{}))
	readUntil(t, r, view, wire.TypeLoad)
	prompt := make([]uint32, 16*6+1) // 6 full blocks
	for i := range 8 {
		prompt[0] = uint32(i + 1)
		must(t, r.Send(uint32(i+1), generate(prompt, 2)))
		if _, e := readStream(t, r, uint32(i+1), map[wire.Type]int{}, view); e != nil {
			t.Fatal(e)
		}
	}
	must(t, r.Send(0, &wire.LoadRequest{}))
	var load wire.Load
	for {
		f, err := r.ReadFrame()
		must(t, err)
		if f.Type == wire.TypeKVEvents {
			var m wire.KVEvents
			must(t, wire.DecodeFrame(f, &m, nil))
			must(t, view.ix.Apply(view.slot, kvEvents(m.Events)))
		}
		if f.Type == wire.TypeLoad {
			must(t, wire.DecodeFrame(f, &load, nil))
			break
		}
	}
	late := newEngineView(t)
	must(t, r.Send(0, &wire.SnapshotRequest{SnapshotID: 1}))
	readUntil(t, r, late, wire.TypeSnapshot)
	rk := s.ranks[0]
	rk.mu.Lock()
	defer rk.mu.Unlock()
	checkView(t, view, rk.core)
	checkView(t, late, rk.core)
	st := view.ix.Stats().Engines[0]
	if st.Blocks[kvstore.TierCPU] != 16 || st.Blocks[kvstore.TierDisk] == 0 {
		t.Fatalf("48 blocks through a 16-block GPU: index holds %v per tier, want a full CPU tier and some on disk", st.Blocks)
	}
	want := []wire.TierUsage{{Tier: wire.TierGPU, Used: 0, Total: 16}, {Tier: wire.TierCPU, Used: 16, Total: 16},
		{Tier: wire.TierDisk, Used: st.Blocks[kvstore.TierDisk], Total: 64}}
	if len(load.Tiers) != 3 || load.Tiers[0] != want[0] || load.Tiers[1] != want[1] || load.Tiers[2] != want[2] {
		t.Fatalf("LOAD tiers %+v, want %+v", load.Tiers, want)
	}
}
