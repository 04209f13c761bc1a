//go:build race

package httpx

// raceEnabled: the race detector changes what every allocation and
// goroutine costs, so memory figures are logged but not held to bounds.
const raceEnabled = true
