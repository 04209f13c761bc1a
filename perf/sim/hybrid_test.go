package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// indexGroups converts a rank's announced groups as the router does.
func indexGroups(t testing.TB, cfg *RankConfig) []kvstore.Group {
	var out []kvstore.Group
	for _, g := range cfg.Groups() {
		kg, err := kvstore.GroupOf(kvstore.GroupKind(g.Kind), int(g.BlockSize), int(g.Window), cfg.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kg)
	}
	return out
}

// TestHybridHitsAsIndexed: over multi-turn conversations on a small pool
// (evictions, chunked prefill, windows sliding, states kept at chunk ends),
// an index fed with the core's events predicts every request's cached
// tokens exactly, and the pool's accounting holds after every step.
func TestHybridHitsAsIndexed(t *testing.T) {
	for _, prof := range []Profile{GPTOSSLikeProfile, Qwen3NextLikeProfile} {
		t.Run(prof.Name, func(t *testing.T) {
			cfg := testRank(160, 0)
			cfg.Profile = prof
			c := newCore(t, cfg)
			ix := kvstore.New(kvstore.Options{})
			slots, err := ix.AddEngine(kvstore.EngineConfig{ID: "e", Groups: indexGroups(t, &cfg)})
			must(t, err)
			blind := kvstore.New(kvstore.Options{}) // every event as one cache
			bslots, err := blind.AddEngine(kvstore.EngineConfig{ID: "e"})
			must(t, err)
			blindWrong := 0
			rng := rand.New(rand.NewPCG(3, 4))
			convs := make([][]uint32, 4)
			hits, key := 0, RequestKey{}
			for turn := range 60 {
				ci := rng.IntN(len(convs))
				prompt := append(convs[ci], randomTokens(rng, 20+rng.IntN(200))...)
				if len(prompt) > 1500 {
					prompt = randomTokens(rng, 100)
				}
				hs, err := c.Hasher().Hash(nil, prompt, &kvstore.Keys{})
				must(t, err)
				out, bout := make([]kvstore.Match, 1), make([]kvstore.Match, 1)
				ix.Match(hs[:min(len(hs), (len(prompt)-1)/cfg.BlockSize)], slots, out)
				blind.Match(hs[:min(len(hs), (len(prompt)-1)/cfg.BlockSize)], bslots, bout)
				if bout[0] != out[0] {
					blindWrong++
				}
				key.Stream = uint32(turn)
				must(t, c.Add(NewRequest(key, prompt, Params{MaxTokens: 1 + rng.IntN(40)}, kvstore.Keys{})))
				var gen []uint32
				for !c.Idle() {
					res := c.Step()
					must(t, c.Check())
					must(t, ix.Apply(slots[0], res.Events))
					evs := append([]kvstore.Event(nil), res.Events...)
					for i := range evs {
						evs[i].Group = 0
					}
					must(t, blind.Apply(bslots[0], evs))
					for _, o := range res.Outputs {
						if o.First && o.Cached != out[0].Depth()*cfg.BlockSize {
							t.Fatalf("turn %d: engine cached %d tokens, index predicted %d", turn, o.Cached, out[0].Depth()*cfg.BlockSize)
						}
						if o.HasToken {
							gen = append(gen, o.Token)
						}
					}
				}
				if out[0].Depth() > 0 {
					hits++
				}
				convs[ci] = append(prompt, gen...)
			}
			if hits < 10 || blindWrong == 0 {
				t.Fatalf("%d of 60 turns hit the cache, a group-blind index mispredicted %d: the test says little", hits, blindWrong)
			}
			t.Logf("%d of 60 turns hit; a group-blind index mispredicted %d", hits, blindWrong)
		})
	}
}

// TestHybridGroupsKeepWhatTheyNeed: after one long prompt, the window
// group holds only its window's blocks, a Mamba group one state, and the
// full group every block, in the events and in use.
func TestHybridGroupsKeepWhatTheyNeed(t *testing.T) {
	cfg := testRank(400, 0)
	cfg.Profile = hybridProfile("t", GroupSpec{Kind: "full"}, GroupSpec{Kind: "sliding_window", Window: 64}, GroupSpec{Kind: "mamba"})
	cfg.MaxBatchedTokens = 4096
	c := newCore(t, cfg)
	prompt := randomTokens(rand.New(rand.NewPCG(1, 1)), 1600) // 100 blocks, one step
	must(t, c.Add(NewRequest(RequestKey{}, prompt, Params{MaxTokens: 1}, kvstore.Keys{})))
	res := c.Step()
	stored := map[uint16]int{}
	for _, ev := range res.Events {
		if ev.Kind == kvstore.Stored {
			stored[ev.Group] += len(ev.Hashes)
		}
	}
	// Full and window groups cache every completed block (freed window
	// blocks stay cached until evicted); the Mamba group the state at the
	// step's last boundary.
	if stored[0] != 100 || stored[1] != 100 || stored[2] != 1 {
		t.Fatalf("stored per group %v, want 100, 100, 1", stored)
	}
	if used := c.blocks.capacity() - c.blocks.freeBlocks(); used != 0 {
		t.Fatalf("%d blocks in use after the request finished", used)
	}
	if got := cfg.Groups(); len(got) != 3 || got[1].Kind != wire.GroupSlidingWindow || got[1].Window != 64 {
		t.Fatalf("announced groups %+v", got)
	}
}

// TestHybridRefusesTiers: lower tiers are not modelled for hybrid models.
func TestHybridRefusesTiers(t *testing.T) {
	cfg := testRank(100, 100)
	cfg.Profile = GPTOSSLikeProfile
	if _, err := NewCore(cfg); err == nil {
		t.Fatal("a hybrid model with a CPU tier was accepted")
	}
	cfg = testRank(100, 0)
	cfg.Profile = hybridProfile("bad", GroupSpec{Kind: "sparse"})
	if _, err := NewCore(cfg); err == nil {
		t.Fatal("an unknown group kind was accepted")
	}
}

func randomTokens(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(rng.IntN(vocabSize))
	}
	return out
}
