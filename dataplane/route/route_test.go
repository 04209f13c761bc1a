package route

import (
	"math/rand/v2"
	"testing"
)

// TestRouteAllocatesOnlyItsDecision: once warm, a kv decision allocates the
// Decision it returns and nothing else (its working memory is pooled).
func TestRouteAllocatesOnlyItsDecision(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	pool := simPool(t, 4)
	r := New(pool, PolicyKV, DefaultWeights())
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]uint32, 2048)
	for i := range prompt {
		prompt[i] = uint32(rng.IntN(150000))
	}
	req := &Request{Model: "kvgate/sim", Tokens: prompt}
	route := func() {
		d, err := r.Route(req)
		if err != nil {
			t.Fatal(err)
		}
		d.Done()
	}
	route()
	if a := testing.AllocsPerRun(50, route); a > 1 {
		t.Fatalf("%.1f allocations per decision, want 1 (the Decision)", a)
	}
}
