package passthrough

import (
	"errors"

	"github.com/kvgate/kvgate/ebpf"
)

// Why relaying a response failed, as Engine.Cut counts them.
const (
	// CutDuplicated: the kernel delivered some of the engine's bytes twice
	// under sockmap steering, and the steerer abandoned the response.
	CutDuplicated = iota
	// CutTruncated: the engine closed before the length it declared.
	CutTruncated
	// CutOther: the engine sent no header, the client left, either side
	// reset, or a deadline passed. (A failed dial is not a relay: the
	// engine is marked unhealthy instead.)
	CutOther
	numCuts
)

// CutNames label the Cut reasons in metrics.
var CutNames = [numCuts]string{"duplicated", "truncated", "other"}

// Cut is how many relays of the engine's responses failed for reason (one
// of the Cut constants), before or after the header reached the client.
func (e *Engine) Cut(reason int) uint64 { return e.cut[reason].Load() }

// cutReason classifies an error that ended a relay.
func cutReason(err error) int {
	switch {
	case errors.Is(err, ebpf.ErrDuplicated):
		return CutDuplicated
	case errors.Is(err, ebpf.ErrTruncated):
		return CutTruncated
	default:
		return CutOther
	}
}
