// Command kvgate-bench is kvgate's perf harness: `run` drives any OpenAI- or
// Anthropic-compatible endpoint with a workload; `compare` starts a kvgate
// per routing policy, in front of simulated engines it starts or of
// engines that run already, and replays the same workload against each;
// `llamacpp` starts llama.cpp servers behind bridges and compares on them;
// `simulate` runs the cluster in virtual time.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/workload"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `Usage: kvgate-bench COMMAND [flags]

Commands:
  run      drive an endpoint: --target URL --workload SPEC [--api ...] [--rate R | --speed X | --concurrency C] --json FILE
  compare  simulated engines and a kvgate per policy: --engines N --policies P1,P2 --workload SPEC --json FILE --report DIR
           or engines that run already: --engine-addrs HOST:PORT,... | --http-engines URL,... [--llamacpp URL,...]
  llamacpp real engines: --servers N llama-servers (perf/gguf model) behind kvgate-bridge, then compare against them
  simulate a virtual-time cluster: --engines N --routers M --sync-delay D --policies ... --workload SPEC --json FILE --report DIR
           tiers: --gpu-blocks G --cpu-blocks C --disk-blocks D per engine (also compare's)
  goodput  virtual time, kv: aggregated on --engines N against each P:D split (--splits 2,4,6; --modes conditional,rule,always)
           over --loads 1,2,3,4; requests/s within --ttft-slo and --tpot-slo together; --out DIR: table, goodput.svg, JSON
  ideal    the hit rate of one pooled LRU cache per size: --workload SPEC --blocks N1,N2,...
  hybrid   hybrid-model engines (--sim-profile gptoss-like,qwen3next-like): the router's predicted hit against the engines' cached_tokens per policy (kv, kv-group-blind)
  floor    the least a router on gnet and netpoll does per request, to set beside nginx: --listen ADDR --mode loop|worker
  schedstate goroutines' states over Go execution traces, a poller's wait apart: [--cpus N] TRACE...
  streams  streamed tokens/s and kvgate CPU per million tokens: --streams 256,2048 --max-tokens N [--kvgate before=PATH,after=PATH]

Workload SPECs: mooncake:PATH, azure:PATH, shared-prefix:groups=8,prefix=4096,suffix=256,n=1000,rate=4,
multi-turn:sessions=64,turns=8,system=2048,user=256,output=128,think=2,rate=4,
agentic:agents=32,steps=8,system=2048,result=1024,output=64,think=1,rate=2,
burst:bursts=5,prefix=2048,suffix=1024,n=64,warm=1,gap=3 (all generators take seed=N).
Run "kvgate-bench COMMAND --help" for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "compare":
		err = cmdCompare(ctx, args[1:], stdout, stderr)
	case "simulate":
		err = cmdSimulate(ctx, args[1:], stdout, stderr)
	case "goodput":
		err = cmdGoodput(ctx, args[1:], stdout, stderr)
	case "llamacpp":
		err = cmdLlamaCpp(ctx, args[1:], stdout, stderr)
	case "ideal":
		err = cmdIdeal(ctx, args[1:], stdout, stderr)
	case "streams":
		err = cmdStreams(ctx, args[1:], stdout, stderr)
	case "hybrid":
		err = cmdHybrid(ctx, args[1:], stdout, stderr)
	case "floor":
		err = cmdFloor(ctx, args[1:], stdout, stderr)
	case "schedstate":
		err = cmdSchedstate(args[1:], stdout, stderr)
	default:
		err = fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kvgate-bench:", err)
		return 1
	}
	return 0
}

// loadFlags are the load generator's flags, shared by run and compare.
type loadFlags struct {
	workload, api, model, jsonOut, apiKey string
	rate, speed                           float64
	concurrency, maxRequests              int
	duration                              time.Duration
	slo                                   loadgen.SLO // goodput targets; zero: no goodput
}

func (l *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.workload, "workload", "", "workload SPEC (see kvgate-bench --help)")
	fs.StringVar(&l.api, "api", "openai-completions", "openai-completions (token-id prompts), openai-chat or anthropic (prompts as text)")
	fs.StringVar(&l.model, "model", "Qwen/Qwen3-8B", "model name to request")
	fs.StringVar(&l.jsonOut, "json", "", "write results as JSON to this file")
	fs.StringVar(&l.apiKey, "api-key", "", "API key to send")
	fs.Float64Var(&l.rate, "rate", 0, "Poisson arrivals at this rate per second instead of the workload's times")
	fs.Float64Var(&l.speed, "speed", 1, "replay the workload's times this many times faster")
	fs.IntVar(&l.concurrency, "concurrency", 0, "closed loop with this many clients instead of timed arrivals")
	fs.IntVar(&l.maxRequests, "max-requests", 0, "send at most this many requests")
	fs.DurationVar(&l.duration, "duration", 0, "stop sending after this long")
	fs.DurationVar(&l.slo.TTFT, "ttft-slo", 0, "goodput: a request's time-to-first-token target (with --tpot-slo: requests/s within both)")
	fs.DurationVar(&l.slo.TPOT, "tpot-slo", 0, "goodput: a request's time-per-output-token target, after the first")
}

func (l *loadFlags) options(target string, progress io.Writer) (loadgen.Options, error) {
	o := loadgen.Options{Target: strings.TrimSuffix(target, "/"), API: l.api, Model: l.model, APIKey: l.apiKey,
		Speed: l.speed, Rate: l.rate, Concurrency: l.concurrency, Duration: l.duration, MaxRequests: l.maxRequests,
		Progress: progress, SLO: l.slo}
	if l.api != "openai-completions" {
		tok, err := tokenize.Builtin()
		if err != nil {
			return o, err
		}
		o.Detokenize = func(ids []uint32) string { return tok.DecodeString(ids, true) }
	}
	return o, nil
}

// parse parses the command line and loads the workload it names.
func (l *loadFlags) parse(fs *flag.FlagSet, args []string) (*workload.Workload, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return workload.Parse(l.workload)
}

func (l *loadFlags) flagMap() map[string]any {
	return map[string]any{"workload": l.workload, "api": l.api, "model": l.model, "rate": l.rate, "speed": l.speed,
		"concurrency": l.concurrency, "max_requests": l.maxRequests, "duration": l.duration.String()}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var l loadFlags
	l.register(fs)
	target := fs.String("target", "http://127.0.0.1:8080", "base URL of the endpoint")
	wl, err := l.parse(fs, args)
	if err != nil {
		return err
	}
	o, err := l.options(*target, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "running %d requests of %s against %s\n", len(wl.Requests), l.workload, *target)
	res, err := loadgen.Run(ctx, o, wl)
	if err != nil {
		return err
	}
	res.Flags = l.flagMap()
	res.Flags["target"] = *target
	printResult(stdout, "run", res)
	return writeJSON(l.jsonOut, res)
}

func printResult(w io.Writer, name string, r *loadgen.Result) {
	fmt.Fprintf(w, "%-14s %5d ok %3d err  TTFT p50 %7.0f p99 %7.0f ms  ITL p50 %5.1f ms  e2e p99 %7.0f ms  %6.2f req/s  hit %.3f  imbalance %.2f\n",
		name, r.Requests, r.Errors, r.TTFT.P50, r.TTFT.P99, r.ITL.P50, r.E2E.P99, r.RequestsPerS, r.PrefixHitRate, r.Imbalance)
	if g := r.Goodput; g != nil {
		fmt.Fprintf(w, "%-14s goodput %.3f req/s of %.3f (TTFT <= %s: %d, TPOT <= %s: %d, both: %d of %d)\n",
			name, g.RequestsPerS, r.RequestsPerS, g.TTFT, g.TTFTMet, g.TPOT, g.TPOTMet, g.Met, r.Requests)
	}
	for _, e := range r.FirstErrors {
		fmt.Fprintf(w, "    error: %s\n", e)
	}
}

func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
