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
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

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
	// SLO, when set, counts requests within its targets (Result.Goodput).
	SLO SLO
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
	rec.SetSLO(o.SLO)
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
