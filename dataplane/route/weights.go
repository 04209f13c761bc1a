package route

import "errors"

// weights returns the weights in force. A decision loads them once, so a
// SetWeights during it changes only later decisions.
func (r *Router) weights() *Weights { return r.wt.Load() }

// Weights returns a copy of the weights in force.
func (r *Router) Weights() Weights { return *r.weights() }

// SetWeights replaces the routing weights while the router serves (a
// config reload): decisions already under way finish with the old ones.
// Weights that would make every cost meaningless are refused.
func (r *Router) SetWeights(w Weights) error {
	if err := w.Validate(); err != nil {
		return err
	}
	r.wt.Store(&w)
	return nil
}

// Validate refuses weights no decision can use: a prefill rate that is not
// positive, a negative decode or tie weight, or a negative bound.
func (w *Weights) Validate() error {
	switch {
	case !(w.PrefillTokensPerMs > 0):
		return errors.New("route: the prefill rate must be positive")
	case w.DecodeMsPerKToken < 0 || w.DecodeStepBaseMs < 0 || w.DecodeStepUtilMs < 0:
		return errors.New("route: decode weights must not be negative")
	case w.TieFraction < 0 || w.ApproxBlockCost < 0:
		return errors.New("route: the tie fraction and the approximate-block cost must not be negative")
	case w.MaxInflight < 0 || w.ReportDelay < 0:
		return errors.New("route: --max-inflight and the report delay must not be negative")
	case w.SplitTargets.TTFT < 0 || w.SplitTargets.TPOT < 0:
		return errors.New("route: the split's TTFT and TPOT targets must not be negative")
	}
	return nil
}
