package loadgen

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Recorder accumulates per-request measurements into a Result. It is safe
// for concurrent use; the cluster simulation uses it too.
type Recorder struct {
	mu             sync.Mutex
	ttft, itl, e2e *hdrhistogram.Histogram
	res            *Result
	sent           []sentWork
	slo            SLO     // goodput.go
	good           Goodput // the counts against slo
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	h := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3) }
	return &Recorder{ttft: h(), itl: h(), e2e: h(), res: &Result{Engines: map[string]EngineWork{}}}
}

// Fail counts a failed request.
func (r *Recorder) Fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Errors++
	if len(r.res.FirstErrors) < 5 {
		r.res.FirstErrors = append(r.res.FirstErrors, msg)
	}
}

// OK records a completed request: its engine, when it was sent (from the
// start of the run), time to first token, end to end time, the gaps between
// its tokens, and its token counts.
func (r *Recorder) OK(engine string, at, ttft, e2e time.Duration, gaps []time.Duration, prompt, cached, output int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sentWork{at: at, engine: engine, work: float64(prompt - cached)})
	res := r.res
	res.Requests++
	_ = r.ttft.RecordValue(max(ttft.Microseconds(), 1))
	_ = r.e2e.RecordValue(max(e2e.Microseconds(), 1))
	for _, g := range gaps {
		_ = r.itl.RecordValue(max(g.Microseconds(), 1))
	}
	res.promptTokens += prompt
	res.cachedTokens += cached
	res.outputTokens += output
	r.judge(ttft, e2e, output) // goodput.go
	w := res.Engines[engine]
	w.Requests++
	w.PromptTokens += prompt
	w.UncachedTokens += prompt - cached
	res.Engines[engine] = w
}

type sentWork struct {
	at     time.Duration
	engine string
	work   float64
}

// Finish computes the result of a run that took wall on workload spec.
func (r *Recorder) Finish(wall time.Duration, spec string) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Workload, res.WallSeconds = spec, wall.Seconds()
	res.TTFT, res.ITL, res.E2E = summarize(r.ttft), summarize(r.itl), summarize(r.e2e)
	res.Load = loadOverTime(r.sent, wall)
	res.RequestsPerS = float64(res.Requests) / wall.Seconds()
	res.Goodput = r.goodput(wall)
	res.OutputTokensPerS = float64(res.outputTokens) / wall.Seconds()
	if res.promptTokens > 0 {
		res.PrefixHitRate = float64(res.cachedTokens) / float64(res.promptTokens)
	}
	res.Imbalance = imbalance(res.Engines, func(w EngineWork) int { return w.UncachedTokens })
	res.RequestImbalance = imbalance(res.Engines, func(w EngineWork) int { return w.Requests })
	return res
}
