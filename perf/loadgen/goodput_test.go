package loadgen

import (
	"testing"
	"time"
)

// TestGoodput: requests are counted within each target and both, TPOT
// over the tokens after the first; no SLO, no Goodput.
func TestGoodput(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := NewRecorder()
	r.SetSLO(SLO{TTFT: ms(100), TPOT: ms(10)})
	for _, q := range []struct {
		ttft, e2e time.Duration
		output    int
	}{
		{ms(50), ms(50 + 9*10), 10},   // both: TPOT exactly 10 ms
		{ms(150), ms(150 + 9*5), 10},  // TPOT only
		{ms(50), ms(50 + 9*11), 10},   // TTFT only
		{ms(200), ms(200 + 9*20), 10}, // neither
		{ms(80), ms(80), 1},           // one token: no TPOT to miss
	} {
		r.OK("e", 0, q.ttft, q.e2e, nil, 100, 0, q.output)
	}
	res := r.Finish(2*time.Second, "w")
	g := res.Goodput
	if g == nil || g.Met != 2 || g.TTFTMet != 3 || g.TPOTMet != 3 || g.RequestsPerS != 1 || g.TTFT != "100ms" || g.TPOT != "10ms" {
		t.Fatalf("goodput %+v", g)
	}
	plain := NewRecorder()
	plain.OK("e", 0, ms(1), ms(2), nil, 1, 0, 2)
	if res := plain.Finish(time.Second, "w"); res.Goodput != nil {
		t.Fatalf("no SLO: goodput %+v", res.Goodput)
	}
}
