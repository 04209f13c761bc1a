package kvstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// refModel is the plain-maps reference the index is checked against.
type refModel struct {
	engines map[string][]Slot
	held    map[Slot]*[NumTiers]map[uint64]bool
}

func newRefModel() *refModel {
	return &refModel{engines: map[string][]Slot{}, held: map[Slot]*[NumTiers]map[uint64]bool{}}
}

func (r *refModel) addSlot(s Slot) {
	var tiers [NumTiers]map[uint64]bool
	for t := range tiers {
		tiers[t] = map[uint64]bool{}
	}
	r.held[s] = &tiers
}

func (r *refModel) apply(s Slot, evs []Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case Stored:
			for _, h := range ev.Hashes {
				r.held[s][ev.Tier][h] = true
			}
		case Removed:
			for _, h := range ev.Hashes {
				delete(r.held[s][ev.Tier], h)
			}
		case Cleared:
			r.held[s][ev.Tier] = map[uint64]bool{}
		}
	}
}

func (r *refModel) match(hashes []uint64, s Slot) Match {
	var m Match
	tiers, ok := r.held[s]
	if !ok {
		return m
	}
	for _, h := range hashes {
		t := Tier(0)
		for t < NumTiers && !tiers[t][h] {
			t++
		}
		if t == NumTiers {
			break
		}
		m.Blocks[t]++
	}
	return m
}

func (r *refModel) digest(s Slot, t Tier) Digest {
	var d Digest
	for h := range r.held[s][t] {
		d.add(h)
	}
	return d
}

// hashPool makes block hashes that crowd a few shards, so probe runs are long,
// wrap around the end of a table and exercise backward-shift deletion.
func hashPool(t *rapid.T) []uint64 {
	seed := rapid.Uint64().Draw(t, "seed")
	rng := rand.New(rand.NewPCG(seed, 1))
	pool := make([]uint64, 48)
	for i := range pool {
		h := rng.Uint64()
		if i%3 != 0 {
			h = h>>shardBits | uint64(i%2)<<(64-shardBits) // shards 0 and 1
		}
		pool[i] = h
	}
	return pool
}

// TestIndexAgainstModel runs random event, engine and sweep sequences and
// checks every match, block count and digest against the reference.
func TestIndexAgainstModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		pool := hashPool(rt)
		ix := New(Options{})
		ref := newRefModel()
		var names []string
		drawHashes := func(label string) []uint64 {
			idx := rapid.SliceOfN(rapid.IntRange(0, len(pool)-1), 0, 12).Draw(rt, label)
			hs := make([]uint64, len(idx))
			for i, j := range idx {
				hs[i] = pool[j]
			}
			return hs
		}
		allSlots := func() []Slot {
			var out []Slot
			for _, n := range names {
				out = append(out, ref.engines[n]...)
			}
			return out
		}
		rt.Repeat(map[string]func(*rapid.T){
			"add": func(rt *rapid.T) {
				name := fmt.Sprintf("e%d", rapid.IntRange(0, 6).Draw(rt, "engine"))
				if _, ok := ref.engines[name]; ok {
					return
				}
				slots, err := ix.AddEngine(EngineConfig{ID: name, Ranks: rapid.IntRange(1, 2).Draw(rt, "ranks")})
				if err != nil {
					rt.Fatal(err)
				}
				ref.engines[name] = slots
				for _, s := range slots {
					ref.addSlot(s)
				}
				names = append(names, name)
			},
			"remove": func(rt *rapid.T) {
				if len(names) == 0 {
					rt.Skip("no engines")
				}
				i := rapid.IntRange(0, len(names)-1).Draw(rt, "which")
				name := names[i]
				if err := ix.RemoveEngine(name); err != nil {
					rt.Fatal(err)
				}
				for _, s := range ref.engines[name] {
					delete(ref.held, s)
				}
				delete(ref.engines, name)
				names = slices.Delete(names, i, i+1)
			},
			"apply": func(rt *rapid.T) {
				slots := allSlots()
				if len(slots) == 0 {
					rt.Skip("no engines")
				}
				s := slots[rapid.IntRange(0, len(slots)-1).Draw(rt, "slot")]
				n := rapid.IntRange(1, 4).Draw(rt, "events")
				evs := make([]Event, n)
				for i := range evs {
					kind := EventKind(rapid.SampledFrom([]int{1, 1, 1, 2, 2, 3}).Draw(rt, "kind"))
					evs[i] = Event{Kind: kind, Tier: Tier(rapid.IntRange(0, NumTiers-1).Draw(rt, "tier"))}
					if kind != Cleared {
						evs[i].Hashes = drawHashes("hashes")
					}
				}
				if err := ix.Apply(s, evs); err != nil {
					rt.Fatal(err)
				}
				ref.apply(s, evs)
			},
			"replace": func(rt *rapid.T) {
				slots := allSlots()
				if len(slots) == 0 {
					rt.Skip("no engines")
				}
				s := slots[rapid.IntRange(0, len(slots)-1).Draw(rt, "slot")]
				ev := Event{Kind: Stored, Tier: Tier(rapid.IntRange(0, NumTiers-1).Draw(rt, "tier")), Hashes: drawHashes("hashes")}
				if err := ix.Replace(s, []Event{ev}); err != nil {
					rt.Fatal(err)
				}
				ref.addSlot(s)
				ref.apply(s, []Event{ev})
			},
			"sweep": func(rt *rapid.T) {
				ix.Sweep(rapid.IntRange(1, numShards).Draw(rt, "shards"))
			},
			"": func(rt *rapid.T) { // the check, after every step
				slots := allSlots()
				prompt := drawHashes("prompt")
				out := make([]Match, len(slots))
				ix.Match(prompt, slots, out)
				for i, s := range slots {
					if want := ref.match(prompt, s); out[i] != want {
						rt.Fatalf("slot %d: match %+v, want %+v", s, out[i], want)
					}
				}
				st := ix.Stats()
				for _, es := range st.Engines {
					for tier := range Tier(NumTiers) {
						if want := uint64(len(ref.held[es.Slot][tier])); es.Blocks[tier] != want {
							rt.Fatalf("slot %d tier %d: %d blocks, want %d", es.Slot, tier, es.Blocks[tier], want)
						}
						d, _ := ix.Digest(es.Slot, tier)
						if want := ref.digest(es.Slot, tier); d != want {
							rt.Fatalf("slot %d tier %d: digest differs", es.Slot, tier)
						}
					}
				}
				if len(st.Engines) != len(ref.held) {
					rt.Fatalf("%d slots in stats, want %d", len(st.Engines), len(ref.held))
				}
			},
		})
	})
}
