//go:build race

package tokenize

// raceEnabled: under the race detector sync.Pool drops a share of what is
// put back on purpose, so pooled scratch is allocated again now and then.
const raceEnabled = true
