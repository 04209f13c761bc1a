package route

import (
	"math"
	"testing"
)

// TestPickNearTie: among costs within TieFraction of the least, each is
// picked about as often as the others; a cost outside is never picked.
func TestPickNearTie(t *testing.T) {
	w := DefaultWeights() // TieFraction 0.05
	for _, tc := range []struct {
		name  string
		costs []float64
		near  []bool
	}{
		{"one", []float64{3}, []bool{true}},
		{"equal", []float64{10, 10, 10}, []bool{true, true, true}},
		{"within 5%", []float64{10.4, 10, 12}, []bool{true, true, false}},
		{"the least last", []float64{20, 20, 1}, []bool{false, false, true}},
		{"unbounded", []float64{math.Inf(1), math.Inf(1)}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000
			counts := make([]int, len(tc.costs))
			for range n {
				counts[w.PickNearTie(tc.costs)]++
			}
			near := 0
			for _, ok := range tc.near {
				if ok {
					near++
				}
			}
			for i, ok := range tc.near {
				switch {
				case !ok && counts[i] > 0:
					t.Fatalf("cost %v picked %d times, not a near-tie", tc.costs[i], counts[i])
				case ok && counts[i] < n/near*8/10:
					t.Fatalf("near-tie %d picked %d of %d times, want about %d", i, counts[i], n, n/near)
				}
			}
		})
	}
	if w.PickNearTie(nil) != -1 {
		t.Fatal("a pick among no costs")
	}
	costs := []float64{1, 1, 2}
	if a := testing.AllocsPerRun(100, func() { w.PickNearTie(costs) }); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}
