package engine

import (
	"testing"

	"github.com/kvgate/kvgate/wire"
)

// TestHybridGroups: a hybrid engine's groups reach the index, and its
// events land in the group they name, so a sliding-window group that drops
// a block leaves the full-attention group's copy of the same hash; a
// group-blind pool (the baseline) takes every event as one cache, and the
// same drop costs it the block.
func TestHybridGroups(t *testing.T) {
	chain := []uint64{0xc1, 0xc2, 0xc3, 0xc4}
	for _, blind := range []bool{false, true} {
		hs := ttHandshake("hybrid")
		hs.Features |= wire.FeatureHybridGroups
		hs.Groups = []wire.Group{{Kind: wire.GroupSlidingWindow, BlockSize: 16, Window: 33}, {Kind: wire.GroupFull, BlockSize: 16}}
		eng := ttStartEngine(t, hs, nil)
		p, _ := ttPool(t, func(c *Config) { c.GroupBlind = blind }, eng.addr)
		e := p.Engines()[0]
		c := eng.accept(t)
		ttReady(t, e)
		if got := c.Peer.Features&wire.FeatureHybridGroups != 0; got == blind {
			t.Fatalf("blind %v: the router's HELLO asks for groups: %v", blind, got)
		}
		stored := func(g uint16, hs ...uint64) wire.Event {
			ev := ttStored(wire.TierGPU, hs...)
			ev.Group = g
			return ev
		}
		removed := ttRemoved(wire.TierGPU, chain[:2]...) // the window group's blocks outside its window
		c.send(t, 0, ttBatch(1, 0, stored(0, chain...), stored(1, chain...)))
		c.send(t, 0, ttBatch(2, 0, removed))
		slot, _ := e.Slot()
		// Window 33 tokens of 16-token blocks needs cdiv(32, 16) = 2 blocks
		// before the hit: blocks 2 and 3 serve a hit of all 4. Blind, the
		// removal took blocks 0 and 1 from the one cache: no hit at all.
		want, blocks := 4, uint64(6) // the window group's 2, the full group's 4
		if blind {
			want, blocks = 0, 2 // one cache: 4 stored (twice), 2 removed
		}
		ttWaitFor(t, "the events applied", func() bool {
			var n uint64
			for _, es := range p.Index().Stats().Engines {
				n += es.Blocks[0]
			}
			return n == blocks
		})
		if got := ttHeld(p.Index(), slot, chain).Depth(); got != want {
			t.Fatalf("blind %v: hit %d blocks, want %d", blind, got, want)
		}
		if groups := len(e.profile().groups); (groups == 2) == blind {
			t.Fatalf("blind %v: engine indexed with %d groups", blind, groups)
		}
	}
}
