package cluster

import (
	"testing"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/workload"
)

func TestPooledLRU(t *testing.T) {
	hc := kvstore.HashConfig{BlockSize: 16, Model: "m"}
	seq := func(from, n int) []uint32 {
		p := make([]uint32, n)
		for i := range p {
			p[i] = uint32(from + i)
		}
		return p
	}
	a, b := seq(1, 16*4+1), seq(1000, 16*4+1) // four full blocks each, and a token
	wl := &workload.Workload{Requests: []workload.Request{{Prompt: a}, {Prompt: a}, {Prompt: b}, {Prompt: a}}}
	for _, tc := range []struct {
		capacity int
		want     float64 // cached prompt tokens of the four requests / 4 x 65
	}{
		{0, 0},
		{4, 64.0 / 260},  // a's second run hits all 4 blocks; b pushes all of a out
		{6, 96.0 / 260},  // b's four push out a's last two: a's head, used last, stays, and a hits 2 blocks
		{8, 128.0 / 260}, // room for both: a hits 4 blocks twice
	} {
		got, err := PooledLRU(wl, hc, tc.capacity)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("capacity %d: hit %v, want %v", tc.capacity, got, tc.want)
		}
	}
}
