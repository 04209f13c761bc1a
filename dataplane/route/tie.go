package route

import "math/rand/v2"

// PickNearTie returns the index in costs of the candidate to choose: one
// picked at random among the near-ties, those within TieFraction of the
// least cost, so that decisions made on the same view (concurrent ones,
// other replicas', sequential ones before any of them shows in the load)
// do not all land on one engine. The wire path (Router) and the HTTP
// engines' (package passthrough) both choose with it. It returns -1 when
// costs is empty, and does not allocate.
func (w *Weights) PickNearTie(costs []float64) int {
	if len(costs) == 0 {
		return -1
	}
	best := costs[0]
	for _, c := range costs[1:] {
		best = min(best, c)
	}
	limit := best * (1 + w.TieFraction)
	n := 0
	for _, c := range costs {
		if c <= limit {
			n++
		}
	}
	if n == 0 { // a NaN cost: no candidate compares as near
		return rand.IntN(len(costs))
	}
	k := rand.IntN(n)
	for i, c := range costs {
		if c <= limit {
			if k == 0 {
				return i
			}
			k--
		}
	}
	panic("unreachable")
}
