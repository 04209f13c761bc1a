package loadgen

import "time"

// SLO is a latency target per request, as DistServe and Mooncake state
// goodput: its time to first token, and its time per output token after
// the first, (e2e - TTFT) / (output - 1). A zero target is not checked.
type SLO struct {
	TTFT, TPOT time.Duration
}

// Goodput is what a run measured against Options.SLO.
type Goodput struct {
	// TTFT and TPOT are the targets.
	TTFT string `json:"ttft_target"`
	TPOT string `json:"tpot_target"`
	// Met are the requests within both targets; TTFTMet and TPOTMet,
	// within each.
	Met     int `json:"met"`
	TTFTMet int `json:"ttft_met"`
	TPOTMet int `json:"tpot_met"`
	// RequestsPerS is Met over the run's wall time: the goodput.
	RequestsPerS float64 `json:"requests_per_s"`
}

// SetSLO makes the recorder count requests against s (Result.Goodput).
func (r *Recorder) SetSLO(s SLO) {
	r.mu.Lock()
	r.slo = s
	r.mu.Unlock()
}

// judge counts a completed request against the SLO; r.mu is held.
func (r *Recorder) judge(ttft, e2e time.Duration, output int) {
	if r.slo == (SLO{}) {
		return
	}
	var tpot time.Duration
	if output > 1 {
		tpot = (e2e - ttft) / time.Duration(output-1)
	}
	ttftOK, tpotOK := r.slo.TTFT <= 0 || ttft <= r.slo.TTFT, r.slo.TPOT <= 0 || tpot <= r.slo.TPOT
	if ttftOK {
		r.good.TTFTMet++
	}
	if tpotOK {
		r.good.TPOTMet++
	}
	if ttftOK && tpotOK {
		r.good.Met++
	}
}

// goodput is the Result's Goodput after wall, nil without an SLO; r.mu
// is held.
func (r *Recorder) goodput(wall time.Duration) *Goodput {
	if r.slo == (SLO{}) {
		return nil
	}
	g := r.good
	g.TTFT, g.TPOT, g.RequestsPerS = r.slo.TTFT.String(), r.slo.TPOT.String(), float64(g.Met)/wall.Seconds()
	return &g
}
