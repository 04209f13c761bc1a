package loadgen

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	// CDF holds (ms, fraction) points for plots.
	CDF [][2]float64 `json:"cdf,omitempty"`
}

// EngineWork is what one engine was sent.
type EngineWork struct {
	Requests       int `json:"requests"`
	PromptTokens   int `json:"prompt_tokens"`
	UncachedTokens int `json:"uncached_tokens"`
}

// LoadPoint is one time slice of Result.Load.
type LoadPoint struct {
	Seconds float64 `json:"t"`
	Max     float64 `json:"max"`
	Mean    float64 `json:"mean"`
}

// Result is a run's outcome.
type Result struct {
	Requests         int     `json:"requests"`
	Errors           int     `json:"errors"`
	TTFT             Summary `json:"ttft_ms"`
	ITL              Summary `json:"itl_ms"`
	E2E              Summary `json:"e2e_ms"`
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	PrefixHitRate    float64 `json:"prefix_hit_rate"`
	Imbalance        float64 `json:"imbalance"`
	// RequestImbalance is the same over requests: the most any engine was
	// sent over the mean (herding shows here when hits make prefill cheap).
	RequestImbalance float64               `json:"request_imbalance"`
	Engines          map[string]EngineWork `json:"engines"`
	// Load is per-engine prefill work over time: for each slice of the run,
	// the most any engine was sent (uncached prompt tokens) and the mean
	// over engines that got work.
	Load         []LoadPoint    `json:"load_over_time"`
	Workload     string         `json:"workload"`
	Flags        map[string]any `json:"flags"`
	WallSeconds  float64        `json:"wall_seconds"`
	FirstErrors  []string       `json:"first_errors,omitempty"`
	promptTokens int
	cachedTokens int
	outputTokens int

	// Goodput counts requests against Options.SLO (nil without one).
	Goodput *Goodput `json:"goodput,omitempty"`
}

// loadSlices is the number of time slices of Result.Load.
const loadSlices = 40

func loadOverTime(sent []sentWork, wall time.Duration) []LoadPoint {
	if len(sent) == 0 || wall <= 0 {
		return nil
	}
	slice := wall / loadSlices
	per := make([]map[string]float64, loadSlices)
	for _, s := range sent {
		i := min(int(s.at/max(slice, 1)), loadSlices-1)
		if per[i] == nil {
			per[i] = map[string]float64{}
		}
		per[i][s.engine] += s.work
	}
	out := make([]LoadPoint, loadSlices)
	for i, m := range per {
		out[i].Seconds = (time.Duration(i) * slice).Seconds()
		var sum float64
		for _, w := range m {
			sum += w
			out[i].Max = max(out[i].Max, w)
		}
		if len(m) > 0 {
			out[i].Mean = sum / float64(len(m))
		}
	}
	return out
}

func summarize(h *hdrhistogram.Histogram) Summary {
	s := Summary{Mean: h.Mean() / 1000, P50: float64(h.ValueAtQuantile(50)) / 1000,
		P90: float64(h.ValueAtQuantile(90)) / 1000, P99: float64(h.ValueAtQuantile(99)) / 1000}
	for q := 0.0; q <= 100; q += 2 {
		s.CDF = append(s.CDF, [2]float64{float64(h.ValueAtQuantile(q)) / 1000, q / 100})
	}
	return s
}

// CountEngines makes every engine of ids appear in Engines (idle ones with
// nothing) and recomputes Imbalance over all of them: an engine that was
// sent no work is the worst imbalance there is.
func (r *Result) CountEngines(ids []string) {
	for _, id := range ids {
		if _, ok := r.Engines[id]; !ok {
			r.Engines[id] = EngineWork{}
		}
	}
	r.Imbalance = imbalance(r.Engines, func(w EngineWork) int { return w.UncachedTokens })
	r.RequestImbalance = imbalance(r.Engines, func(w EngineWork) int { return w.Requests })
}

// imbalance is the largest of one measure over engines, over its mean.
func imbalance(engines map[string]EngineWork, measure func(EngineWork) int) float64 {
	var top, sum float64
	for _, w := range engines {
		v := float64(measure(w))
		sum += v
		top = max(top, v)
	}
	if sum == 0 {
		return 0
	}
	return top / (sum / float64(len(engines)))
}
