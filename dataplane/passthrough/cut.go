package passthrough

import (
	"errors"
	"strconv"

	"github.com/kvgate/kvgate/ebpf"
)

// CutReason is why relaying a response failed, as Engine.Cut counts them.
// Its String is the reason label of kvgate_http_responses_cut_total.
type CutReason uint8

// Cut reasons.
const (
	// CutDuplicated: the kernel delivered some of the engine's bytes twice
	// under sockmap steering, and the steerer abandoned the response.
	CutDuplicated CutReason = iota
	// CutTruncated: the engine closed before the length it declared.
	CutTruncated
	// CutOther: the engine sent no header, the client left, either side
	// reset, or a deadline passed. (A failed dial is not a relay: the
	// engine is marked unhealthy instead.)
	CutOther
	numCutReasons
)

// CutReasons are every CutReason, in order, for collectors to range over.
var CutReasons = [numCutReasons]CutReason{CutDuplicated, CutTruncated, CutOther}

// cutNames are the metric labels of the reasons.
var cutNames = [numCutReasons]string{"duplicated", "truncated", "other"}

// String is the reason's metric label: duplicated, truncated or other.
func (r CutReason) String() string {
	if r < numCutReasons {
		return cutNames[r]
	}
	return "CutReason(" + strconv.Itoa(int(r)) + ")"
}

// Cut is how many relays of the engine's responses failed for reason,
// before or after the header reached the client.
func (e *Engine) Cut(reason CutReason) uint64 { return e.cut[reason].Load() }

// cutReason classifies an error that ended a relay.
func cutReason(err error) CutReason {
	switch {
	case errors.Is(err, ebpf.ErrDuplicated):
		return CutDuplicated
	case errors.Is(err, ebpf.ErrTruncated):
		return CutTruncated
	default:
		return CutOther
	}
}
