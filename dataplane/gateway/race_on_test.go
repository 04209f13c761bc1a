//go:build race

package gateway

// raceEnabled: the race detector allocates on its own and makes sync.Pool
// drop items at random, so allocation counts are checked only without it.
const raceEnabled = true
