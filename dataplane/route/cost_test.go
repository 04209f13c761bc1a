package route

import (
	"testing"

	"github.com/kvgate/kvgate/kvstore"
)

func TestCost(t *testing.T) {
	w := DefaultWeights()
	base := Candidate{BlockSize: 16, MaxBatched: 8192, CapacityTokens: 1 << 20}
	cost := func(mod func(c *Candidate), p Policy) float64 {
		c := base
		if mod != nil {
			mod(&c)
		}
		return w.Cost(p, &c, 4096)
	}
	cold := cost(nil, PolicyKV)
	hot := cost(func(c *Candidate) { c.Match.Blocks[kvstore.TierGPU] = 200 }, PolicyKV)
	cpu := cost(func(c *Candidate) { c.Match.Blocks[kvstore.TierCPU] = 200 }, PolicyKV)
	approx := cost(func(c *Candidate) { c.Match.Approx = 200 }, PolicyKV)
	queued := cost(func(c *Candidate) { c.QueuedPrefill = 20000 }, PolicyKV)
	decoding := cost(func(c *Candidate) { c.ActiveDecode = 500000 }, PolicyKV)
	switch {
	case !(hot < cpu && cpu < cold && hot < approx && approx < cold):
		t.Fatalf("GPU hits must beat CPU and approximate ones, which beat none: %v %v %v %v", hot, cpu, approx, cold)
	case !(queued > cold):
		t.Fatalf("queued prefill must cost: %v vs %v", queued, cold)
	case !(decoding > cold+5):
		t.Fatalf("a busy decode batch must slow prefill: %v vs %v", decoding, cold)
	}
	// A fully cached prompt still costs a token of work, never less.
	if full := cost(func(c *Candidate) { c.Match.Blocks[kvstore.TierGPU] = 256 }, PolicyKV); full <= 0 {
		t.Fatalf("fully cached cost %v", full)
	}
	// dynamo: prefill blocks - overlap + decode blocks.
	if got := cost(func(c *Candidate) { c.QueuedPrefill = 160; c.ActiveDecode = 320; c.Match.Blocks[kvstore.TierGPU] = 10 }, PolicyDynamo); got != (160+4096)/16.0-10+320/16.0 {
		t.Fatalf("dynamo cost %v", got)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []string{"kv", "round-robin", "least-load", "session", "approx-prefix", "dynamo"} {
		if _, err := ParsePolicy(p); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParsePolicy("random"); err == nil {
		t.Error("unknown policy accepted")
	}
}
