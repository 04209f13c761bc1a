// Package loadgen drives an OpenAI- or Anthropic-compatible endpoint with a
// workload and measures it as a client would: time to first token,
// inter-token latency, end-to-end latency (HDR histograms), throughput,
// the prefix hit rate the engines report, and how evenly the engines were
// loaded. Arrivals are open-loop: each request is sent at its scheduled
// time whether or not earlier ones finished, and its latency counts from
// that scheduled time, so a slow target cannot hide its queueing
// (no coordinated omission).
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kvgate/kvgate/perf/workload"
)

// Options configure a run.
type Options struct {
	// Target is the base URL, or several separated by commas (replicas of
	// one router): request i of the workload goes to target i mod n.
	Target string
	// API is openai-completions (token ids sent as the prompt), openai-chat
	// or anthropic (prompts detokenized to text with Detokenize).
	API         string
	Model       string
	APIKey      string
	Speed       float64       // divides arrival times
	Rate        float64       // if > 0: Poisson arrivals at this rate instead of the trace's
	Concurrency int           // if > 0: closed loop with this many clients
	Duration    time.Duration // stop sending after this (0: whole workload)
	MaxRequests int
	Detokenize  func([]uint32) string
	Progress    io.Writer
}

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
}

// Recorder accumulates per-request measurements into a Result. It is safe
// for concurrent use; the cluster simulation uses it too.
type Recorder struct {
	mu             sync.Mutex
	ttft, itl, e2e *hdrhistogram.Histogram
	res            *Result
	sent           []sentWork
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	h := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3) }
	return &Recorder{ttft: h(), itl: h(), e2e: h(), res: &Result{Engines: map[string]EngineWork{}}}
}

// Run executes wl against the target.
func Run(ctx context.Context, o Options, wl *workload.Workload) (*Result, error) {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.API == "" {
		o.API = "openai-completions"
	}
	if o.API != "openai-completions" && o.Detokenize == nil {
		return nil, fmt.Errorf("loadgen: %s needs text prompts and no detokenizer was given", o.API)
	}
	reqs := wl.Requests
	if o.MaxRequests > 0 && len(reqs) > o.MaxRequests {
		reqs = reqs[:o.MaxRequests]
	}
	if o.Rate > 0 {
		rng := rand.New(rand.NewPCG(9, 9))
		var at time.Duration
		reqs = append([]workload.Request(nil), reqs...)
		for i := range reqs {
			at += time.Duration(rng.ExpFloat64() / o.Rate * float64(time.Second))
			reqs[i].At = at
		}
	}
	targets := strings.Split(o.Target, ",")
	target := func(i int) string { return strings.TrimSuffix(strings.TrimSpace(targets[i%len(targets)]), "/") }
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}
	rec := NewRecorder()
	start := time.Now()
	stop := progress(ctx, o.Progress, rec, len(reqs), start)
	defer stop()
	var wg sync.WaitGroup
	if o.Concurrency > 0 {
		next := make(chan int)
		for range o.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					sendOne(ctx, client, o, target(i), reqs[i], start, time.Now(), rec)
				}
			}()
		}
		for i := range reqs {
			if ctx.Err() != nil || (o.Duration > 0 && time.Since(start) > o.Duration) {
				break
			}
			next <- i
		}
		close(next)
	} else {
		for i, r := range reqs {
			due := start.Add(time.Duration(float64(r.At) / o.Speed))
			if o.Duration > 0 && due.Sub(start) > o.Duration {
				break
			}
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			go func() { defer wg.Done(); sendOne(ctx, client, o, target(i), r, start, due, rec) }()
		}
	}
	wg.Wait()
	return rec.Finish(time.Since(start), wl.Spec), nil
}

func progress(ctx context.Context, w io.Writer, rec *Recorder, total int, start time.Time) func() {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				rec.mu.Lock()
				fmt.Fprintf(w, "  %6.0fs  %d/%d done, %d errors, TTFT p50 %.0f ms p99 %.0f ms\n", time.Since(start).Seconds(),
					rec.res.Requests, total, rec.res.Errors,
					float64(rec.ttft.ValueAtQuantile(50))/1000, float64(rec.ttft.ValueAtQuantile(99))/1000)
				rec.mu.Unlock()
			}
		}
	}()
	return cancel
}

// sendOne sends one streamed request and records what it saw; latencies
// count from due, the time it was scheduled.
func sendOne(ctx context.Context, c *http.Client, o Options, target string, r workload.Request, start, due time.Time, rec *Recorder) {
	body, path := requestBody(o, r)
	req, err := http.NewRequestWithContext(ctx, "POST", target+path, bytes.NewReader(body))
	if err != nil {
		rec.Fail(err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
		req.Header.Set("x-api-key", o.APIKey)
	}
	if r.Session != "" {
		req.Header.Set("X-Session-Id", r.Session)
	}
	resp, err := c.Do(req)
	if err != nil {
		rec.Fail(err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		rec.Fail(fmt.Sprintf("status %d: %s", resp.StatusCode, b))
		return
	}
	engine := resp.Header.Get("x-kvgate-engine")
	var first, last time.Time
	var gaps []time.Duration
	var prompt, cached, output int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		var ev streamEvent
		if json.Unmarshal([]byte(line[6:]), &ev) != nil {
			continue
		}
		if ev.Error != nil {
			rec.Fail("in-stream error: " + string(*ev.Error))
			return
		}
		if ev.hasText() {
			now := time.Now()
			if first.IsZero() {
				first = now
			} else {
				gaps = append(gaps, now.Sub(last))
			}
			last = now
		}
		if u := ev.usage(); u != nil {
			prompt, cached, output = max(prompt, u.prompt), max(cached, u.cached), max(output, u.output)
		}
	}
	if err := sc.Err(); err != nil || first.IsZero() {
		rec.Fail(fmt.Sprintf("stream ended without tokens: %v", err))
		return
	}
	if prompt == 0 {
		prompt = len(r.Prompt)
	}
	rec.OK(engine, due.Sub(start), first.Sub(due), last.Sub(due), gaps, prompt, cached, output)
}

func requestBody(o Options, r workload.Request) ([]byte, string) {
	switch o.API {
	case "openai-chat":
		b, _ := json.Marshal(map[string]any{"model": o.Model, "max_tokens": r.Output, "ignore_eos": true, "stream": true,
			"stream_options": map[string]any{"include_usage": true}, "user": r.Session,
			"messages": []any{map[string]any{"role": "user", "content": o.Detokenize(r.Prompt)}}})
		return b, "/v1/chat/completions"
	case "anthropic":
		b, _ := json.Marshal(map[string]any{"model": o.Model, "max_tokens": r.Output, "stream": true,
			"metadata": map[string]any{"user_id": r.Session},
			"messages": []any{map[string]any{"role": "user", "content": o.Detokenize(r.Prompt)}}})
		return b, "/v1/messages"
	}
	b, _ := json.Marshal(map[string]any{"model": o.Model, "prompt": r.Prompt, "max_tokens": r.Output, "ignore_eos": true,
		"stream": true, "stream_options": map[string]any{"include_usage": true}, "user": r.Session})
	return b, "/v1/completions"
}

// streamEvent covers the fields of OpenAI chunks and Anthropic events we read.
type streamEvent struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Type  string `json:"type"`
	Delta struct {
		Text string `json:"text"`
	} `json:"delta"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		Details          struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		CacheRead    int `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Message *struct {
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	} `json:"message"`
	Error *json.RawMessage `json:"error"`
}

func (e *streamEvent) hasText() bool {
	if e.Type == "content_block_delta" {
		return e.Delta.Text != ""
	}
	for _, c := range e.Choices {
		if c.Text != "" || c.Delta.Content != "" {
			return true
		}
	}
	return false
}

type seenUsage struct{ prompt, cached, output int }

func (e *streamEvent) usage() *seenUsage {
	switch {
	case e.Usage != nil:
		u := e.Usage
		return &seenUsage{prompt: max(u.PromptTokens, u.InputTokens), cached: max(u.Details.Cached, u.CacheRead),
			output: max(u.CompletionTokens, u.OutputTokens)}
	case e.Message != nil:
		return &seenUsage{prompt: e.Message.Usage.InputTokens}
	}
	return nil
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

// Finish computes the result of a run that took wall on workload spec.
func (r *Recorder) Finish(wall time.Duration, spec string) *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Workload, res.WallSeconds = spec, wall.Seconds()
	res.TTFT, res.ITL, res.E2E = summarize(r.ttft), summarize(r.itl), summarize(r.e2e)
	res.Load = loadOverTime(r.sent, wall)
	res.RequestsPerS = float64(res.Requests) / wall.Seconds()
	res.OutputTokensPerS = float64(res.outputTokens) / wall.Seconds()
	if res.promptTokens > 0 {
		res.PrefixHitRate = float64(res.cachedTokens) / float64(res.promptTokens)
	}
	res.Imbalance = imbalance(res.Engines, func(w EngineWork) int { return w.UncachedTokens })
	res.RequestImbalance = imbalance(res.Engines, func(w EngineWork) int { return w.Requests })
	return res
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
