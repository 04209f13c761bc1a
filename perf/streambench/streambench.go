// Package streambench measures what one kvgate replica costs per streamed
// token: zero-cost simulated engines in this process (real TCP, the real
// wire protocol) generate as fast as they are read, one kvgate process
// routes to them, and N concurrent clients each stream one long completion
// (Server-Sent Events) to its end. A run's tokens are the clients' own
// count (the usage chunk each stream ends with, checked against
// max_tokens); its CPU is the kvgate process's user + system time from
// /proc over the same interval.
//
// Several kvgate binaries can be measured in one run against the same
// engines (a build from before a change and one from after), all started
// at once and measured in alternation, round by round, so that a load on
// the shared machine that comes and goes falls on each alike: the report
// then gives each one's ratio to the first.
package streambench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvgate/kvgate/perf/cpustat"
	"github.com/kvgate/kvgate/perf/routers"
	"github.com/kvgate/kvgate/perf/sim"
)

// Model is the model the simulated engines serve: the name of kvgate's
// built-in tokenizer, so kvgate needs no tokenizer files.
const Model = "Qwen/Qwen3-8B"

// Binary is one kvgate build to measure.
type Binary struct {
	// Label names it in the report ("before", "after").
	Label string
	Path  string
}

// Options configure a run.
type Options struct {
	// Binaries are measured at every Streams count, in turn within each
	// round.
	Binaries []Binary
	// Engines is how many zero-cost simulated engines serve the model.
	Engines int
	// Streams are the concurrent stream counts to measure.
	Streams []int
	// MaxTokens is each stream's max_tokens (generated in full: ignore_eos).
	MaxTokens int
	// StepMs, when positive, paces the engines: every decode step takes
	// this long, as a GPU's would, so each stream gets one token a step
	// whichever router reads it (with zero-cost engines a router that
	// reads more slowly gets more tokens a frame). CPU per token is then
	// the router's alone, at a load the engines set.
	StepMs float64
	// Rounds repeats each measurement; the report keeps the best round
	// (the one the shared machine disturbed least).
	Rounds int
	// ProfileDir, when set, receives a CPU profile of kvgate per binary
	// and stream count (<label>-<streams>.pprof), taken during a round
	// after the measured ones.
	ProfileDir string
	// Log, when set, is told of each step.
	Log func(format string, args ...any)
}

// Defaults returns 2 engines, 256 and 2,048 streams of 2,048 tokens, one
// round, no profiles.
func Defaults() Options {
	return Options{Engines: 2, Streams: []int{256, 2048}, MaxTokens: 2048, Rounds: 1}
}

// Validate reports options a run cannot use.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Binaries) == 0 {
		errs = append(errs, errors.New("streambench: no kvgate binary"))
	}
	for _, b := range o.Binaries {
		if b.Label == "" || b.Path == "" {
			errs = append(errs, fmt.Errorf("streambench: binary %q needs a label and a path", b.Label+"="+b.Path))
		}
	}
	if o.Engines < 1 {
		errs = append(errs, fmt.Errorf("streambench: %d engines, want at least 1", o.Engines))
	}
	if len(o.Streams) == 0 {
		errs = append(errs, errors.New("streambench: no stream counts"))
	}
	for _, n := range o.Streams {
		if n < 1 {
			errs = append(errs, fmt.Errorf("streambench: %d streams, want at least 1", n))
		}
	}
	if o.StepMs < 0 {
		errs = append(errs, fmt.Errorf("streambench: step of %v ms, want 0 (zero-cost) or more", o.StepMs))
	}
	if o.MaxTokens < 1 || o.Rounds < 1 {
		errs = append(errs, fmt.Errorf("streambench: max tokens %d and rounds %d must be at least 1", o.MaxTokens, o.Rounds))
	}
	return errors.Join(errs...)
}

// Result is one binary at one stream count.
type Result struct {
	Label   string `json:"label"`
	Streams int    `json:"streams"`
	// Tokens are the completion tokens the clients received.
	Tokens int64         `json:"tokens"`
	Wall   time.Duration `json:"wall_ns"`
	// CPU is kvgate's CPU seconds over Wall.
	CPU float64 `json:"cpu_s"`
	// Events are the SSE events the clients read (tokens per event shows
	// how far output was batched).
	Events int64 `json:"events"`
}

// CPUPerEvent is kvgate's CPU microseconds per SSE event: what an event
// costs whatever the engines' frames held (zero-cost engines send fewer,
// larger frames to a router that reads them more slowly).
func (r Result) CPUPerEvent() float64 { return r.CPU * 1e6 / float64(max(r.Events, 1)) }

// TokensPerSecond is the throughput through the replica.
func (r Result) TokensPerSecond() float64 { return float64(r.Tokens) / r.Wall.Seconds() }

// CPUPerMillion is kvgate's CPU seconds per million streamed tokens.
func (r Result) CPUPerMillion() float64 { return r.CPU / (float64(r.Tokens) / 1e6) }

// Run measures every binary at every stream count.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	maxStreams := 0
	for _, n := range o.Streams {
		maxStreams = max(maxStreams, n)
	}
	cfg := sim.DefaultConfig()
	cfg.Rank.Model, cfg.Rank.Profile = Model, sim.ZeroProfile
	if o.StepMs > 0 {
		cfg.Rank.Profile = sim.Profile{Name: "paced", DecodeC: o.StepMs, DecodeMin: o.StepMs}
	}
	cfg.Rank.MaxRunning = maxStreams                                                         // every stream decodes at once
	cfg.Rank.GPUBlocks = max(cfg.Rank.GPUBlocks, maxStreams*(o.MaxTokens/16+8)/o.Engines+64) // no preemption
	engines, err := sim.StartLocal(o.Engines, cfg, "stream")
	if err != nil {
		return nil, err
	}
	defer engines.Close()
	return measure(ctx, o, engines.Addrs, logf)
}

// router is one binary's running kvgate and its clients.
type router struct {
	b     Binary
	rs    *routers.Routers
	cl    *clients
	admin string
	pid   int
}

// measure starts every binary's kvgate, then measures each stream count
// in rounds, every binary once a round; a binary's best round (least CPU
// per token) is its result.
func measure(ctx context.Context, o Options, addrs []string, logf func(string, ...any)) ([]Result, error) {
	var rts []*router
	defer func() {
		for _, rt := range rts {
			rt.cl.close()
			rt.rs.Stop()
		}
	}()
	for _, b := range o.Binaries {
		rs, err := routers.Start(ctx, routers.Options{Binary: b.Path, Policy: "kv", Engines: addrs, Replicas: 1})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.Label, err)
		}
		rt := &router{b: b, rs: rs, cl: newClients(rs.Bases[0]), admin: rs.Admins[0], pid: rs.Pids()[0]}
		rts = append(rts, rt)
		if _, err := rt.cl.round(ctx, 8, 64); err != nil { // warm: connections, the tokenizer's caches
			return nil, fmt.Errorf("%s: warm-up: %w", b.Label, err)
		}
	}
	var out []Result
	for _, n := range o.Streams {
		best := make([]Result, len(rts))
		for round := range o.Rounds {
			for i, rt := range rts {
				cpu0, t0 := cpustat.Process(rt.pid), time.Now()
				c, err := rt.cl.round(ctx, n, o.MaxTokens)
				if err != nil {
					return out, fmt.Errorf("%s: %d streams: %w", rt.b.Label, n, err)
				}
				r := Result{Label: rt.b.Label, Streams: n, Tokens: c.tokens, Events: c.events, Wall: time.Since(t0), CPU: cpustat.Process(rt.pid) - cpu0}
				logf("%s: %d streams, round %d: %.0f tokens/s, %.2f CPU s per million tokens, %.1f CPU us per event",
					rt.b.Label, n, round+1, r.TokensPerSecond(), r.CPUPerMillion(), r.CPUPerEvent())
				if round == 0 || r.CPUPerMillion() < best[i].CPUPerMillion() {
					best[i] = r
				}
			}
		}
		out = append(out, best...)
		if o.ProfileDir == "" {
			continue
		}
		for i, rt := range rts {
			path := filepath.Join(o.ProfileDir, fmt.Sprintf("%s-%d.pprof", rt.b.Label, n))
			if err := profileRound(ctx, rt.cl, rt.admin, path, n, o.MaxTokens, best[i].Wall); err != nil {
				return out, err
			}
			logf("%s: %d streams: CPU profile %s", rt.b.Label, n, path)
		}
	}
	return out, nil
}

// profileRound runs one more round while kvgate's pprof records its CPU
// for most of it (pprof takes a duration: wall is a measured round's).
func profileRound(ctx context.Context, cl *clients, admin, path string, n, maxTokens int, wall time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	secs := max(1, int(wall.Seconds()*0.8))
	done := make(chan error, 1)
	go func() { _, err := cl.round(ctx, n, maxTokens); done <- err }()
	perr := fetchProfile(ctx, admin, secs, path)
	if err := <-done; err != nil {
		return fmt.Errorf("profiled round: %w", err)
	}
	return perr
}
