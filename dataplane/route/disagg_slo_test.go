package route

import (
	"math"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// sloCand is a candidate of the disaggregation tests' shape: 16-token
// blocks, 8k-token steps, 1 M tokens of KV.
func sloCand(queued, decode float64) Candidate {
	return Candidate{BlockSize: 16, QueuedPrefill: queued, ActiveDecode: decode, MaxBatched: 8192, CapacityTokens: 1 << 20}
}

var (
	idleCand = sloCand(0, 0)
	busyCand = sloCand(0, 40000) // a decode batch of 40,000 KV tokens
	targets  = SplitTargets{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond}
)

// TestShouldSplitTargets: with TTFT and TPOT targets a long prompt next
// to a busy decode batch is split only when its output is long enough to
// spread the transfer below the TPOT target; without targets (or without
// an output bound) the speed comparison decides, as before.
func TestShouldSplitTargets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		targets   SplitTargets
		prompt    int
		maxTokens int
		split     bool
	}{
		{"no targets: the faster (split)", SplitTargets{}, 38000, 2, true},
		{"a 38k prompt's transfer blows a 2-token output's TPOT", targets, 38000, 2, false},
		{"a 38k prompt's transfer spread over 1,000 tokens", targets, 38000, 1000, true},
		{"output bound unknown: TTFT only", targets, 38000, 0, true},
		{"a one-token output has no TPOT", targets, 38000, 1, true},
		{"an 8k prompt's transfer fits even 2 tokens", targets, 8000, 2, true},
		{"TTFT target only", SplitTargets{TTFT: 2 * time.Second}, 38000, 2, true},
		{"a short prompt stays aggregated", targets, 32, 1000, false},
	} {
		w := DefaultWeights()
		w.SplitTargets = tc.targets
		pc := w.Cost(PolicyKV, &idleCand, tc.prompt)
		ch := SplitChoice{Aggregated: &busyCand, PrefillCost: pc, Decode: &busyCand, Prompt: tc.prompt, MaxTokens: tc.maxTokens}
		if got := w.ShouldSplit(&ch); got != tc.split {
			split, agg := w.HandoffCost(pc, &busyCand, tc.prompt), w.AggregatedCost(&busyCand, tc.prompt)
			t.Errorf("%s: split %v, want %v (second token split %.1f ms, aggregated %.1f ms; split TPOT %.1f ms)", tc.name, got, tc.split,
				split, agg, w.tpotMs(split-pc, &busyCand, tc.prompt, tc.maxTokens))
		}
	}
}

// TestShouldSplitThreshold: the shortest output a split is taken for is
// where the cost model's gap (second token less first) and decode step
// meet the TPOT target, m* = 1 + (gap - step) / (TPOT - step); it grows
// with the prompt (a longer transfer) and shrinks with a faster link.
func TestShouldSplitThreshold(t *testing.T) {
	w := DefaultWeights()
	w.SplitTargets = targets
	tpot := float64(targets.TPOT) / float64(time.Millisecond)
	shortest := func(prompt int) int {
		pc := w.Cost(PolicyKV, &idleCand, prompt)
		for m := 2; m < 1<<16; m++ {
			ch := SplitChoice{Aggregated: &busyCand, PrefillCost: pc, Decode: &busyCand, Prompt: prompt, MaxTokens: m}
			if w.ShouldSplit(&ch) {
				return m
			}
		}
		return -1
	}
	last := 0
	for _, prompt := range []int{20000, 38000, 60000, 90000} {
		pc := w.Cost(PolicyKV, &idleCand, prompt)
		gap, step := w.HandoffCost(pc, &busyCand, prompt)-pc, w.decodeStep(&busyCand, prompt)
		want := max(int(math.Ceil(1+(gap-step)/(tpot-step))), 2)
		got := shortest(prompt)
		if got != want {
			t.Errorf("%d-token prompt: split from %d output tokens, want %d (gap %.1f ms, step %.1f ms)", prompt, got, want, gap, step)
		}
		if got <= last {
			t.Errorf("%d-token prompt: split from %d output tokens, not more than a shorter prompt's %d", prompt, got, last)
		}
		last = got
	}
	slow := shortest(60000)
	defer func(l TierLink) { DisaggLink = l }(DisaggLink)
	DisaggLink.BytesPerMs *= 4
	if fast := shortest(60000); fast >= slow {
		t.Errorf("a 4x faster link: split from %d output tokens, not fewer than %d", fast, slow)
	}
}

// TestShouldSplitMissedTTFT: where aggregated serving would miss the TTFT
// target and a split meets both, the split is taken though its second
// token comes later (the speed comparison alone keeps it aggregated).
func TestShouldSplitMissedTTFT(t *testing.T) {
	w := DefaultWeights()
	const n = 4000
	agg := sloCand(66*2500, 0)    // 2.5 s of queued prefill
	decode := sloCand(66*2600, 0) // 2.6 s
	pc := w.Cost(PolicyKV, &idleCand, n)
	ch := SplitChoice{Aggregated: &agg, PrefillCost: pc, Decode: &decode, Prompt: n, MaxTokens: 1000}
	if w.ShouldSplit(&ch) {
		t.Fatalf("no targets: split, though aggregated is faster (%.0f against %.0f ms)", w.AggregatedCost(&agg, n), w.HandoffCost(pc, &decode, n))
	}
	w.SplitTargets = targets
	if !w.ShouldSplit(&ch) {
		t.Fatal("aggregated misses the TTFT target, the split meets both: not split")
	}
	ch.MaxTokens = 2 // the 2.6 s gap is the TPOT: neither meets both, the faster wins
	if w.ShouldSplit(&ch) {
		t.Fatal("neither option meets both targets: split, though aggregated is faster")
	}
}

// TestSplitTargetsValidate: negative targets are refused.
func TestSplitTargetsValidate(t *testing.T) {
	w := DefaultWeights()
	w.SplitTargets.TPOT = -time.Millisecond
	if w.Validate() == nil {
		t.Fatal("a negative TPOT target validated")
	}
	w.SplitTargets = targets
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDisaggMaxTokens: the router reads the request's max_tokens. Next to
// busy decode batches, with targets, a 30,000-token prompt asking for 2
// tokens is served aggregated and one asking for 2,000 is split.
func TestDisaggMaxTokens(t *testing.T) {
	w := DefaultWeights()
	w.SplitTargets = targets
	r := New(disaggPool(t), PolicyKV, w)
	var busy []*Decision
	for i := range 8 {
		b, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(32, 300+i), Split: true})
		if err != nil || b.Prefill != nil {
			t.Fatalf("short request %d: %v %+v", i, err, b)
		}
		b.FirstToken()
		b.Generated(8000)
		busy = append(busy, b)
	}
	defer func() {
		for _, b := range busy {
			b.Done()
		}
	}()
	short, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(30000, 6), Split: true, MaxTokens: 2})
	if err != nil || short.Prefill != nil || roleOf(short.Engine) != wire.RoleDecode {
		t.Fatalf("2 output tokens: %v %+v", err, short)
	}
	short.Done()
	long, err := r.Route(&Request{Model: "kvgate/sim", Tokens: distinct(30000, 7), Split: true, MaxTokens: 2000})
	if err != nil || long.Prefill == nil {
		t.Fatalf("2,000 output tokens: %v %+v", err, long)
	}
	long.Done()
}
