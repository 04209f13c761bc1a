//go:build race

package api

// raceEnabled: the race detector makes sync.Pool drop items at random,
// so code that borrows from a pool (json.Valid's scanner) can allocate
// under -race; allocation counts are checked only without it.
const raceEnabled = true
