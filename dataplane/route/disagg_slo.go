package route

import (
	"math"
	"time"

	"github.com/kvgate/kvgate/kvstore"
)

// The split decision against latency targets. Comparing times to the
// second token (Weights.HandoffCost against Weights.AggregatedCost)
// misses what a split does to the request's time per output token,
//
//	TPOT = (e2e - TTFT) / (output - 1),
//
// the figure DistServe and Mooncake hold requests to beside TTFT: the KV
// of a long prompt crosses the link between the client's first token and
// its second, and over a short output that one gap can put TPOT over its
// target. With Weights.SplitTargets set, ShouldSplit predicts both
// figures for both options from the cost model,
//
//	aggregated  TTFT = Cost(d)   TPOT = step(d)
//	split       TTFT = Cost(p)   TPOT = (gap + (m - 2) x step(d')) / (m - 1)
//
// with gap the split's second token less its first (HandoffCost - Cost(p):
// the transfer, what is left of d's queue, one step), step(x) one decode
// step of x with the request in its batch, and m the request's output
// bound (its max_tokens). Where only one option meets both targets it is
// taken; where both or neither do, the faster, as without targets. So a
// split pays off only while gap <= (m - 1) x TPOT - (m - 2) x step(d'):
// the longer the uncached part (gap grows with it), the longer the output
// it needs, a threshold that moves with the link, the queues and the
// batch, not a constant. An unknown output bound (m = 0) or a one-token
// output predicts no TPOT; max_tokens above the real output predicts a
// TPOT below the real one (the gap is spread over tokens never produced).

// SplitTargets are the latency targets a split decision weighs
// (kvgate --split-ttft-target, --split-tpot-target); a zero one is not
// weighed, and with both zero the decision compares speed only.
type SplitTargets struct {
	TTFT, TPOT time.Duration
}

// SplitChoice is a request's two ways of being served, as the router (or
// the cluster simulation) found them.
type SplitChoice struct {
	// Aggregated is the decode-capable engine of least AggregatedCost.
	Aggregated *Candidate
	// PrefillCost is Cost on the prefill engine of least cost: when a
	// split's first token comes.
	PrefillCost float64
	// Decode is the decode engine of least HandoffCost for that prefill.
	Decode *Candidate
	// Prompt is the prompt's length in tokens; MaxTokens, its output bound
	// (0: unknown).
	Prompt, MaxTokens int
}

// ShouldSplit reports whether ch's request is better served split than
// aggregated: never when the decode engine cannot take the hand-off;
// else, with targets, the only option predicted to meet them all, and
// otherwise the one whose second token comes first.
func (w *Weights) ShouldSplit(ch *SplitChoice) bool {
	n := ch.Prompt
	split := w.HandoffCost(ch.PrefillCost, ch.Decode, n)
	if math.IsInf(split, 1) {
		return false
	}
	faster := split < w.AggregatedCost(ch.Aggregated, n)
	t := w.SplitTargets
	if t == (SplitTargets{}) {
		return faster
	}
	agg := w.Cost(PolicyKV, ch.Aggregated, n)
	aggOK := t.meet(agg, w.tpotMs(w.decodeStep(ch.Aggregated, n), ch.Aggregated, n, ch.MaxTokens))
	splitOK := t.meet(ch.PrefillCost, w.tpotMs(split-ch.PrefillCost, ch.Decode, n, ch.MaxTokens))
	if aggOK != splitOK {
		return splitOK
	}
	return faster
}

// tpotMs is the time per output token after the first of an m-token
// output whose second token comes gap ms after its first and the rest a
// decode step of c apart (0: m unknown or under 2, no TPOT).
func (w *Weights) tpotMs(gap float64, c *Candidate, n, m int) float64 {
	if m < 2 {
		return 0
	}
	return (gap + float64(m-2)*w.decodeStep(c, n)) / float64(m-1)
}

// decodeStep is one decode step on c once an n-token prompt's request has
// joined its batch: the cost model's time for one token there, no queue.
func (w *Weights) decodeStep(c *Candidate, n int) float64 {
	one := *c
	one.Match, one.QueuedPrefill, one.Tiers, one.AdapterMs = kvstore.Match{}, 0, TierCosts{}, 0
	one.ActiveDecode += float64(n)
	return w.Cost(PolicyKV, &one, 1)
}

// meet reports whether a predicted TTFT and TPOT (ms) are within the
// targets set.
func (t SplitTargets) meet(ttftMs, tpotMs float64) bool {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return (t.TTFT <= 0 || ttftMs <= ms(t.TTFT)) && (t.TPOT <= 0 || tpotMs <= ms(t.TPOT))
}
