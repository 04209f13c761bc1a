package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

func testRank(gpu, cpu int) RankConfig {
	return testTiers(gpu, cpu, 0)
}

func testTiers(gpu, cpu, disk int) RankConfig {
	return RankConfig{Model: "m", BlockSize: 16, GPUBlocks: gpu, CPUBlocks: cpu, DiskBlocks: disk, MaxRunning: 16,
		MaxBatchedTokens: 512, MaxModelLen: 1 << 16, EOS: DefaultEOS, Profile: DefaultProfile}
}

func newCore(t testing.TB, cfg RankConfig) *Core {
	t.Helper()
	c, err := NewCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// promptFrom builds a prompt of n tokens whose first shared tokens come from
// one of a few common prefixes, so requests hit each other's caches.
func promptFrom(rng *rand.Rand, prefixes [][]uint32, n int) []uint32 {
	p := append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...)
	p = p[:min(len(p), n)]
	for len(p) < n {
		p = append(p, uint32(rng.IntN(vocabSize)))
	}
	return p
}

// engineView replays a core's KV events into a kvstore index.
type engineView struct {
	ix   *kvstore.Index
	slot kvstore.Slot
}

func newEngineView(t testing.TB) *engineView {
	ix := kvstore.New(kvstore.Options{})
	s, err := ix.AddEngine(kvstore.EngineConfig{ID: "e"})
	if err != nil {
		t.Fatal(err)
	}
	return &engineView{ix: ix, slot: s[0]}
}

// checkView compares the index with the core's true cached set per tier.
func checkView(t testing.TB, v *engineView, c *Core) {
	t.Helper()
	var want [kvstore.NumTiers]kvstore.Digest
	var wantN [kvstore.NumTiers]uint64
	for h := range c.blocks.cached {
		addDigest(&want[kvstore.TierGPU], h)
		wantN[kvstore.TierGPU]++
	}
	for _, p := range []*tierPool{&c.blocks.cpu, &c.blocks.disk} {
		for h := range p.entries {
			addDigest(&want[p.tier], h)
			wantN[p.tier]++
		}
	}
	st := v.ix.Stats()
	for tier := range kvstore.NumTiers {
		if got := st.Engines[0].Blocks[tier]; got != wantN[tier] {
			t.Fatalf("tier %d: index holds %d blocks, engine %d", tier, got, wantN[tier])
		}
		d, _ := v.ix.Digest(v.slot, kvstore.Tier(tier))
		if kvstore.Similarity(&d, &want[tier]) != 1 {
			t.Fatalf("tier %d: index and engine hold different blocks", tier)
		}
	}
	for h := range c.blocks.cached {
		out := make([]kvstore.Match, 1)
		v.ix.Match([]uint64{h}, []kvstore.Slot{v.slot}, out)
		if out[0].Blocks[kvstore.TierGPU] != 1 {
			t.Fatalf("block %#x cached on GPU, index says %+v", h, out[0])
		}
	}
}

func addDigest(d *kvstore.Digest, h uint64) {
	b := h % kvstore.DigestBuckets
	d.Count[b]++
	d.Sum[b] += h
	d.Total++
}

// TestCoreRandomWorkload runs random traffic with cancels on a cache too
// small for it (evictions, CPU and disk tiers, preemption) and checks after every step
// that block accounting holds and that replaying the events reproduces the
// engine's cached set; a snapshot taken mid-run plus later events does too.
func TestCoreRandomWorkload(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 42))
		c := newCore(t, testTiers(96, 64, 128))
		live := newEngineView(t)
		var late *engineView // starts from a snapshot
		prefixes := make([][]uint32, 4)
		for i := range prefixes {
			prefixes[i] = promptFrom(rng, [][]uint32{nil}, 200+rng.IntN(300))
		}
		var keys []RequestKey
		next := uint32(1)
		finished := 0
		for step := 0; step < 1500; step++ {
			if rng.IntN(3) == 0 {
				key := RequestKey{Stream: next}
				next++
				r := NewRequest(key, promptFrom(rng, prefixes, 20+rng.IntN(400)),
					Params{MaxTokens: 1 + rng.IntN(40), IgnoreEOS: rng.IntN(2) == 0}, kvstore.Keys{})
				if err := c.Add(r); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			if len(keys) > 0 && rng.IntN(20) == 0 {
				if _, ok := c.Cancel(keys[rng.IntN(len(keys))]); ok {
					finished++
				}
			}
			res := c.Step()
			for _, o := range res.Outputs {
				if o.Finish != wire.FinishNone {
					finished++
				}
			}
			if err := c.Check(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			must(t, live.ix.Apply(live.slot, res.Events))
			if late != nil {
				must(t, late.ix.Apply(late.slot, res.Events))
			}
			if step == 700 {
				late = newEngineView(t)
				must(t, late.ix.Replace(late.slot, c.Snapshot()))
			}
			checkView(t, live, c)
		}
		checkView(t, late, c)
		if st := c.Stats(); st.Preemptions == 0 || st.CPULoads == 0 || st.DiskLoads == 0 || st.CachedTokens == 0 {
			t.Errorf("seed %d: workload did not exercise preemption/CPU and disk tiers/prefix hits: %+v", seed, st)
		}
		if finished == 0 {
			t.Fatalf("seed %d: nothing finished", seed)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runUntilFirst steps until key's first token and returns the virtual time
// and the first output.
func runUntilFirst(t *testing.T, c *Core, key RequestKey) (time.Duration, Output) {
	t.Helper()
	var now time.Duration
	for range 100000 {
		res := c.Step()
		now += res.Duration
		for _, o := range res.Outputs {
			if o.Key == key && o.First {
				return now, o
			}
		}
	}
	t.Fatal("no first token")
	return 0, Output{}
}

func TestPrefixHitSkipsPrefill(t *testing.T) {
	c := newCore(t, testRank(1024, 0))
	rng := rand.New(rand.NewPCG(1, 1))
	shared := promptFrom(rng, [][]uint32{nil}, 2000)
	a := RequestKey{Stream: 1}
	must(t, c.Add(NewRequest(a, append(shared, 1, 2, 3), Params{MaxTokens: 1}, kvstore.Keys{})))
	coldTTFT, first := runUntilFirst(t, c, a)
	if first.Cached != 0 {
		t.Fatalf("cold request reports %d cached tokens", first.Cached)
	}
	b := RequestKey{Stream: 2}
	must(t, c.Add(NewRequest(b, append(shared, 9, 9, 9), Params{MaxTokens: 1}, kvstore.Keys{})))
	warmTTFT, first := runUntilFirst(t, c, b)
	if first.Cached != 2000 {
		t.Fatalf("warm request reports %d cached tokens, want 2000", first.Cached)
	}
	if warmTTFT*3 > coldTTFT {
		t.Fatalf("cached prefix did not pay: cold %v, warm %v", coldTTFT, warmTTFT)
	}
	// A different LoRA shares nothing.
	lora := RequestKey{Stream: 3}
	must(t, c.Add(NewRequest(lora, append(shared, 1, 2, 3), Params{MaxTokens: 1}, kvstore.Keys{LoRAID: 5})))
	if _, first := runUntilFirst(t, c, lora); first.Cached != 0 {
		t.Fatalf("LoRA request hit the base model's cache: %d", first.Cached)
	}
}

// TestQueuedPrefillDelaysFirstToken: the more prefill work is queued ahead of
// a request, the later its first token.
func TestQueuedPrefillDelaysFirstToken(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var ttft []time.Duration
	for _, ahead := range []int{0, 4, 16} {
		c := newCore(t, testRank(4096, 0))
		for i := range ahead {
			must(t, c.Add(NewRequest(RequestKey{Stream: uint32(100 + i)}, promptFrom(rng, [][]uint32{nil}, 1500), Params{MaxTokens: 50, IgnoreEOS: true}, kvstore.Keys{})))
		}
		probe := RequestKey{Stream: 1}
		must(t, c.Add(NewRequest(probe, promptFrom(rng, [][]uint32{nil}, 500), Params{MaxTokens: 1}, kvstore.Keys{})))
		d, _ := runUntilFirst(t, c, probe)
		ttft = append(ttft, d)
	}
	if !(ttft[0] < ttft[1] && ttft[1] < ttft[2]) {
		t.Fatalf("TTFT with 0, 4, 16 requests queued ahead: %v", ttft)
	}
	t.Logf("TTFT with 0, 4, 16 queued: %v", ttft)
}

func TestOutputsHonourParams(t *testing.T) {
	c := newCore(t, testRank(256, 0))
	prompt := []uint32{1, 2, 3, 4, 5}
	// ignore_eos: exactly max_tokens tokens, finish length.
	k := RequestKey{Stream: 1}
	must(t, c.Add(NewRequest(k, prompt, Params{MaxTokens: 37, IgnoreEOS: true, Seed: 7, HasSeed: true}, kvstore.Keys{})))
	toks, last := drain(t, c, k)
	if len(toks) != 37 || last.Finish != wire.FinishLength || last.CompletionTokens != 37 || last.PromptTokens != 5 {
		t.Fatalf("%d tokens, last %+v", len(toks), last)
	}
	// Deterministic: the same seed gives the same tokens.
	k2 := RequestKey{Stream: 2}
	must(t, c.Add(NewRequest(k2, prompt, Params{MaxTokens: 37, IgnoreEOS: true, Seed: 7, HasSeed: true}, kvstore.Keys{})))
	toks2, _ := drain(t, c, k2)
	for i := range toks {
		if toks[i] != toks2[i] {
			t.Fatal("same seed, different tokens")
		}
	}
	// A stop token ends the stream at its first occurrence.
	k3 := RequestKey{Stream: 3}
	must(t, c.Add(NewRequest(k3, prompt, Params{MaxTokens: 37, IgnoreEOS: true, Seed: 7, HasSeed: true, StopTokens: []uint32{toks[10]}}, kvstore.Keys{})))
	toks3, last3 := drain(t, c, k3)
	if last3.Finish != wire.FinishStop || len(toks3) > 11 || toks3[len(toks3)-1] != toks[10] {
		t.Fatalf("stop token: %d tokens, finish %s", len(toks3), last3.Finish)
	}
	// Without ignore_eos, EOS ends streams early on average.
	total := 0
	for i := range 20 {
		k := RequestKey{Stream: uint32(10 + i)}
		must(t, c.Add(NewRequest(k, prompt, Params{MaxTokens: 4000, Seed: uint64(i), HasSeed: true}, kvstore.Keys{})))
		toks, last := drain(t, c, k)
		if last.Finish != wire.FinishStop || toks[len(toks)-1] != DefaultEOS {
			t.Fatalf("want EOS stop, got %s", last.Finish)
		}
		total += len(toks)
	}
	if mean := total / 20; mean < 64 || mean > 1024 {
		t.Fatalf("mean length %d, want about %d", mean, eosOneIn)
	}
}

func drain(t *testing.T, c *Core, key RequestKey) ([]uint32, Output) {
	t.Helper()
	var toks []uint32
	for range 100000 {
		for _, o := range c.Step().Outputs {
			if o.Key != key {
				continue
			}
			if o.HasToken {
				toks = append(toks, o.Token)
			}
			if o.Finish != wire.FinishNone {
				return toks, o
			}
		}
	}
	t.Fatal("request never finished")
	return nil, Output{}
}

func TestCancelFreesBlocks(t *testing.T) {
	c := newCore(t, testRank(64, 0))
	k := RequestKey{Stream: 1}
	must(t, c.Add(NewRequest(k, make([]uint32, 500), Params{MaxTokens: 100, IgnoreEOS: true}, kvstore.Keys{})))
	c.Step()
	if c.blocks.freeBlocks() == c.blocks.capacity() {
		t.Fatal("running request holds no blocks")
	}
	out, ok := c.Cancel(k)
	if !ok || out.Finish != wire.FinishCancelled {
		t.Fatalf("cancel: %v %+v", ok, out)
	}
	if c.blocks.freeBlocks() != c.blocks.capacity() || !c.Idle() {
		t.Fatalf("after cancel %d of %d blocks free", c.blocks.freeBlocks(), c.blocks.capacity())
	}
	must(t, c.Check())
}

func TestAddRejects(t *testing.T) {
	c := newCore(t, testRank(8, 0))
	if err := c.Add(NewRequest(RequestKey{Stream: 1}, make([]uint32, 1000), Params{}, kvstore.Keys{})); err == nil {
		t.Fatal("prompt larger than the cache accepted")
	}
	if err := c.Add(NewRequest(RequestKey{Stream: 2}, nil, Params{}, kvstore.Keys{})); err == nil {
		t.Fatal("empty prompt accepted")
	}
	must(t, c.Add(NewRequest(RequestKey{Stream: 3}, []uint32{1}, Params{}, kvstore.Keys{})))
	if err := c.Add(NewRequest(RequestKey{Stream: 3}, []uint32{1}, Params{}, kvstore.Keys{})); err == nil {
		t.Fatal("duplicate key accepted")
	}
}
