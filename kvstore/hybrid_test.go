package kvstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// vllmHit is the reference: vLLM's coordinator loop over its managers'
// scans, written as kv_cache_coordinator.py and
// single_type_kv_cache_manager.py (commit 00b08dc) write them: full
// attention left to right, sliding window and Mamba right to left with
// early stop, all of them again while one shortens the hit. held[g][j]
// says group g holds its block j; max is the prompt's length in hash
// blocks.
func vllmHit(groups []Group, held [][]bool, max int) int {
	align := 1
	for _, g := range groups {
		align = lcm(align, g.Stride)
	}
	hit := max
	for {
		cur := hit
		for pass := 0; pass < 2; pass++ { // full attention first, as the coordinator sorts them
			for gi, g := range groups {
				if (pass == 0) != (g.Kind == GroupFull) {
					continue
				}
				cur = managerHit(g, held[gi], cur, align)
			}
		}
		if cur >= hit {
			return hit
		}
		hit = cur
	}
}

func managerHit(g Group, held []bool, maxLen, align int) int {
	maxBlocks := maxLen / g.Stride
	switch g.Kind {
	case GroupFull:
		n := 0
		for n < maxBlocks && held[n] {
			n++
		}
		l := n * g.Stride
		return l - l%align
	case GroupMamba:
		for i := maxBlocks - 1; i >= 0; i-- {
			if held[i] && ((i+1)*g.Stride)%align == 0 {
				return (i + 1) * g.Stride
			}
		}
		return 0
	default:
		run := 0
		for i := maxBlocks - 1; i >= 0; i-- {
			if !held[i] {
				run = 0
				continue
			}
			if run == 0 && ((i+1)*g.Stride)%align != 0 {
				continue
			}
			if run++; run >= g.WindowBlocks {
				return (i + run) * g.Stride
			}
		}
		for run*g.Stride%align != 0 {
			run--
		}
		return run * g.Stride
	}
}

var hybridLayouts = map[string][]Group{
	"gptoss":    {{Kind: GroupFull, Stride: 1}, {Kind: GroupSlidingWindow, Stride: 1, WindowBlocks: 8}},
	"qwen3next": {{Kind: GroupMamba, Stride: 1}, {Kind: GroupMamba, Stride: 1}, {Kind: GroupMamba, Stride: 1}, {Kind: GroupFull, Stride: 1}},
	"strided":   {{Kind: GroupSlidingWindow, Stride: 2, WindowBlocks: 3}, {Kind: GroupFull, Stride: 1}, {Kind: GroupMamba, Stride: 4}},
	"no-full":   {{Kind: GroupSlidingWindow, Stride: 1, WindowBlocks: 2}, {Kind: GroupMamba, Stride: 2}},
	"full-big":  {{Kind: GroupFull, Stride: 2}, {Kind: GroupMamba, Stride: 2}},
}

// TestHybridMatchesCoordinator: on random holdings of every layout, Match
// gives the hit of vLLM's coordinator for each of several engines at once.
func TestHybridMatchesCoordinator(t *testing.T) {
	for name, groups := range hybridLayouts {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			for round := range 200 {
				ix := New(Options{})
				n := 1 + rng.IntN(150)
				prompt := prompt512(uint64(round))[:n]
				var cands []Slot
				var want []int
				for e := range 3 {
					slots, err := ix.AddEngine(EngineConfig{ID: fmt.Sprint(e), Groups: groups})
					if err != nil {
						t.Fatal(err)
					}
					held := make([][]bool, len(groups))
					var evs []Event
					lead := rng.IntN(n + 1) // held leading run, then holes
					for gi, g := range groups {
						held[gi] = make([]bool, n/g.Stride)
						for j := range held[gi] {
							end := (j+1)*g.Stride - 1
							p := 0.9
							if end >= lead {
								p = 0.3
							}
							if g.Kind == GroupFull && end >= lead {
								p = 0.05
							}
							if rng.Float64() < p {
								held[gi][j] = true
								evs = append(evs, Event{Kind: Stored, Group: uint16(gi), Hashes: []uint64{prompt[end]}})
							}
						}
					}
					if err := ix.Apply(slots[0], evs); err != nil {
						t.Fatal(err)
					}
					cands = append(cands, slots[0])
					want = append(want, vllmHit(groups, held, n))
				}
				out := make([]Match, len(cands))
				ix.Match(prompt, cands, out)
				for c := range cands {
					if got := out[c].Depth(); got != want[c] {
						t.Fatalf("round %d, %d blocks, engine %d: hit %d, coordinator %d", round, n, c, got, want[c])
					}
				}
			}
		})
	}
}

// TestGroupsKeepHashesApart: one hash in two groups is two holdings; the
// removal from one group leaves the other's, and CLEARED clears them all.
func TestGroupsKeepHashesApart(t *testing.T) {
	ix := New(Options{})
	slots, err := ix.AddEngine(EngineConfig{ID: "e", Groups: hybridLayouts["gptoss"]})
	if err != nil {
		t.Fatal(err)
	}
	p := prompt512(7)[:16]
	s := slots[0]
	must(t, ix.Apply(s, []Event{{Kind: Stored, Group: 0, Hashes: p}, {Kind: Stored, Group: 1, Hashes: p}}))
	out := make([]Match, 1)
	ix.Match(p, slots, out)
	if out[0].Depth() != 16 {
		t.Fatalf("both groups hold 16 blocks: hit %d", out[0].Depth())
	}
	// The window group drops the blocks it no longer needs: the hit stays.
	must(t, ix.Apply(s, []Event{{Kind: Removed, Group: 1, Hashes: p[:8]}}))
	if ix.Match(p, slots, out); out[0].Depth() != 16 {
		t.Fatalf("window group holds the last 8 of 16: hit %d, want 16", out[0].Depth())
	}
	// Group 0 (full) still holds the hashes group 1 removed.
	must(t, ix.Apply(s, []Event{{Kind: Removed, Group: 1, Hashes: p[8:]}}))
	if ix.Match(p, slots, out); out[0].Depth() != 0 {
		t.Fatalf("window group holds nothing: hit %d, want 0", out[0].Depth())
	}
	must(t, ix.Apply(s, []Event{{Kind: Stored, Group: 1, Hashes: p[:8]}}))
	if ix.Match(p, slots, out); out[0].Depth() != 8 {
		t.Fatalf("full holds 16, window the first 8: hit %d, want 8", out[0].Depth())
	}
	must(t, ix.Apply(s, []Event{{Kind: Cleared}}))
	if ix.Match(p, slots, out); out[0].Depth() != 0 {
		t.Fatalf("after CLEARED: hit %d", out[0].Depth())
	}
	if err := ix.Apply(s, []Event{{Kind: Stored, Group: 2, Hashes: p}}); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("group 2 of 2: %v, want ErrBadEvent", err)
	}
	one, _ := ix.AddEngine(EngineConfig{ID: "plain"})
	if err := ix.Apply(one[0], []Event{{Kind: Stored, Group: 1, Hashes: p}}); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("group 1 of an engine without groups: %v, want ErrBadEvent", err)
	}
	// A snapshot replaces every group; removing the engine frees every slot.
	must(t, ix.Replace(s, []Event{{Kind: Stored, Group: 0, Hashes: p}, {Kind: Stored, Group: 1, Hashes: p[8:]}}))
	if ix.Match(p, slots, out); out[0].Depth() != 16 {
		t.Fatalf("after a snapshot: hit %d, want 16", out[0].Depth())
	}
	before := len(ix.Stats().Engines)
	must(t, ix.RemoveEngine("e"))
	if after := len(ix.Stats().Engines); before-after != 2 {
		t.Fatalf("removing a 2-group engine freed %d slots", before-after)
	}
}

// TestHybridMatchAllocs: a hybrid match does not allocate once warm.
func TestHybridMatchAllocs(t *testing.T) {
	ix := New(Options{})
	slots, _ := ix.AddEngine(EngineConfig{ID: "e", Ranks: 2, Groups: hybridLayouts["qwen3next"]})
	p := prompt512(9)
	for g := range 4 {
		must(t, ix.Apply(slots[0], []Event{{Kind: Stored, Group: uint16(g), Hashes: p[:300]}}))
	}
	out := make([]Match, 2)
	if n := testing.AllocsPerRun(100, func() { ix.Match(p, slots, out) }); n != 0 && !raceEnabled {
		t.Fatalf("%v allocs per hybrid match", n) // sync.Pool drops items on purpose under the race detector
	}
	if out[0].Depth() != 300 || out[1].Depth() != 0 {
		t.Fatalf("hits %d, %d; want 300, 0", out[0].Depth(), out[1].Depth())
	}
}

func TestGroupOf(t *testing.T) {
	g, err := GroupOf(GroupSlidingWindow, 16, 128, 16)
	if err != nil || g.WindowBlocks != 8 || g.Stride != 1 {
		t.Fatalf("window 128 of 16-token blocks: %+v %v, want 8 blocks (cdiv(127, 16))", g, err)
	}
	if g, err = GroupOf(GroupMamba, 64, 0, 16); err != nil || g.Stride != 4 {
		t.Fatalf("mamba 64 over 16: %+v %v", g, err)
	}
	for _, c := range [][4]int{{int(GroupFull), 24, 0, 16}, {int(GroupSlidingWindow), 16, 0, 16}, {9, 16, 0, 16}} {
		if _, err := GroupOf(GroupKind(c[0]), c[1], c[2], c[3]); !errors.Is(err, ErrBadGroup) {
			t.Fatalf("%v: %v, want ErrBadGroup", c, err)
		}
	}
}
