package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvgate/kvgate/dataplane/gateway"
	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/wire"
)

var errHelp = errors.New("help")

// config is the daemon's whole configuration: flags, optionally read from
// a file of flag=value lines first (--config), then the command line.
type config struct {
	listen, adminListen string
	engines             []string
	simEngines          int
	simProfile          string
	simGPUBlocks        int
	simCPUBlocks        int
	simDiskBlocks       int
	simSpeed            float64
	tokenizerDir        string
	models              []gateway.ModelSpec // --model, in order; none: the --tokenizer shorthand
	policy              route.Policy
	weights             route.Weights
	apiKeys             map[string]bool
	secret              []byte
	http                httpx.Config
	extraProcs          bool // --extra-procs (dataplane/procs)
	adaptiveProcs       bool // --adaptive-procs (dataplane/procs' Governor)
	retries             int
	maxModelLen         int
	firstTokenTimeout   time.Duration
	drainTimeout        time.Duration
	logLevel            *slog.LevelVar // the logger's: a reload sets it
	args                []string       // the command line, parsed again by a reload
	configFile          string         // --config, read again by a reload
	checkOnly           bool
	ring                ringFlags
	engine              engineFlags
	discovery           discoveryFlags
	media               mediaFlags
	lora                loraFlags
	disagg              disaggFlags // disaggflags.go
	obs                 obsFlags    // the access log and tracing (obs.go)
	httpEngines         []string
	steering            string
	toolParser          string
	reasoningParser     string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{http: httpx.DefaultConfig(), weights: route.DefaultWeights(), apiKeys: map[string]bool{}, logLevel: new(slog.LevelVar),
		args: args}
	fs := flag.NewFlagSet("kvgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "public HTTP address (OpenAI and Anthropic APIs); port 0 picks a free one")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:9090", "admin HTTP address: /metrics, /debug/state, /debug/pprof (keep it on loopback)")
	engines := fs.String("engine", "", "comma-separated HOST:PORT list of wire-protocol engines")
	fs.IntVar(&c.simEngines, "sim-engines", 0, "start N simulated engines in-process on loopback (the embedded default)")
	fs.StringVar(&c.simProfile, "sim-profile", "default", "timing profile of --sim-engines: default, zero, or a JSON file")
	fs.IntVar(&c.simGPUBlocks, "sim-gpu-blocks", 8192, "GPU KV blocks of each simulated engine")
	fs.IntVar(&c.simCPUBlocks, "sim-cpu-blocks", 0, "CPU-tier KV blocks of each simulated engine (0: none); GPU evictions move there")
	fs.IntVar(&c.simDiskBlocks, "sim-disk-blocks", 0, "disk-tier KV blocks of each simulated engine (0: none); CPU-tier evictions move there")
	fs.Float64Var(&c.simSpeed, "sim-speed", 1, "time scale of the simulated engines")
	fs.StringVar(&c.tokenizerDir, "tokenizer", "", "directory with tokenizer.json and tokenizer_config.json (default: the built-in Qwen3 tokenizer), for whatever model names the engines announce; --model instead serves several models")
	fs.Func("model", "a served model, "+gateway.ModelSpecSyntax+" (repeatable): its tokenizer directory (builtin: the built-in Qwen3), the other names requests may use, its output parsers and context length (options not given take --tool-parser, --reasoning-parser, --max-model-len); with --model, only these models are served", func(v string) error {
		s, err := gateway.ParseModelSpec(v)
		if err == nil {
			c.models = append(c.models, s)
		}
		return err
	})
	policy := fs.String("policy", "kv", "routing policy: kv, round-robin, least-load, session, approx-prefix")
	fs.Float64Var(&c.weights.PrefillTokensPerMs, "prefill-rate", c.weights.PrefillTokensPerMs, "kv policy: engine prefill rate in tokens/ms")
	fs.Float64Var(&c.weights.CPUBlockCost, "cpu-block-cost", c.weights.CPUBlockCost, "kv policy: override: cost of a CPU-tier block relative to recomputing it (negative: its transfer time, from the engine's announced tier costs)")
	fs.Float64Var(&c.weights.DecodeMsPerKToken, "decode-weight", c.weights.DecodeMsPerKToken, "kv policy: ms per 1,000 active decode tokens")
	fs.Float64Var(&c.weights.TieFraction, "tie-fraction", c.weights.TieFraction, "kv policy: costs within this fraction of the best are ties, picked at random")
	fs.DurationVar(&c.weights.ReportDelay, "report-delay", c.weights.ReportDelay, "how long an engine's LOAD report may lag a request sent to it (round trip); reservations this recent are counted on top of the report")
	fs.IntVar(&c.weights.MaxInflight, "max-inflight", c.weights.MaxInflight, "requests in flight per engine before it counts as full (429 when all are; 0: no bound)")
	apiKey := fs.String("api-key", "", "require this API key (Authorization: Bearer or x-api-key)")
	apiKeyFile := fs.String("api-key-file", "", "file of API keys, one per line")
	secretFile := fs.String("engine-secret-file", "", "shared secret engines must prove (also $KVGATE_SECRET)")
	fs.IntVar(&c.http.EventLoops, "event-loops", 0, "gnet event loops (0: one per CPU)")
	fs.BoolVar(&c.extraProcs, "extra-procs", false, "a Go P per event loop and netpoll poller besides one per CPU (unless GOMAXPROCS is set): more requests/s for short requests, fewer tokens per SSE event from engines faster than kvgate")
	fs.BoolVar(&c.adaptiveProcs, "adaptive-procs", true, "add --extra-procs' Ps only while the machine has idle CPUs that runnable goroutines wait for, and take them back when it is saturated or quiet (not with GOMAXPROCS set, --extra-procs, or a CPU quota below the machine's CPUs)")
	fs.IntVar(&c.http.MaxHeaderBytes, "max-header-bytes", c.http.MaxHeaderBytes, "largest request header")
	fs.IntVar(&c.http.MaxBodyBytes, "max-body-bytes", c.http.MaxBodyBytes, "largest request body (413 above)")
	fs.DurationVar(&c.http.HeaderTimeout, "header-timeout", c.http.HeaderTimeout, "time a client has to send a request header")
	fs.DurationVar(&c.http.BodyTimeout, "body-timeout", c.http.BodyTimeout, "time a client has to send a request body, from the end of its header")
	fs.DurationVar(&c.http.IdleTimeout, "idle-timeout", c.http.IdleTimeout, "keep-alive idle timeout")
	fs.IntVar(&c.http.PipelineWindow, "pipeline-window", c.http.PipelineWindow, "bytes a client may send ahead while its request is served; past them its socket is not read until its turn")
	fs.IntVar(&c.http.MaxPendingWrite, "max-pending-write", c.http.MaxPendingWrite, "bytes buffered for a client before it is cut off for not reading a stream; whole responses leave at the client's pace")
	fs.DurationVar(&c.http.WriteStallTimeout, "write-stall-timeout", c.http.WriteStallTimeout, "how long a client may read nothing of a whole response before it is cut off")
	fs.IntVar(&c.http.SocketSendBuffer, "socket-send-buffer", 0, "SO_SNDBUF of client sockets in bytes (0: kernel autotuning)")
	fs.IntVar(&c.http.MaxConns, "max-conns", c.http.MaxConns, "client connections held at once, idle or streaming (one more is answered 503); bounds streams in flight too")
	fs.IntVar(&c.retries, "retries", 2, "re-routes of a request whose engine fails before the first token")
	fs.IntVar(&c.maxModelLen, "max-model-len", 0, "the model's context length in tokens, prompt plus max_tokens, as vLLM's --max-model-len (0: the smallest the model's engines announce, else the tokenizer's model_max_length); with --model, the default of each model's max-model-len")
	fs.DurationVar(&c.firstTokenTimeout, "first-token-timeout", 5*time.Minute, "wait for a first token before answering 504")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 30*time.Second, "SIGTERM: how long in-flight requests may finish")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	configFile := fs.String("config", "", "file of flag=value lines, applied before the command line; SIGHUP or POST /admin/reload reads it again (API keys, log level and --engine change live, other changes are refused)")
	fs.BoolVar(&c.checkOnly, "check-config", false, "validate the configuration and exit")
	fs.StringVar(&c.toolParser, "tool-parser", "", "tool-call syntax of the model's output, as vLLM's --tool-call-parser: hermes, llama3_json, deepseek_v3 or none (default: read from the chat template); with --model, the default of each model's tool-parser")
	fs.StringVar(&c.reasoningParser, "reasoning-parser", "", "reasoning syntax of the model's output, as vLLM's --reasoning-parser: qwen3, deepseek_r1 or none (default: the chat template's <think>); with --model, the default of each model's reasoning-parser")
	c.ring.register(fs)
	c.engine.register(fs)
	c.discovery.register(fs)
	c.media.register(fs)
	c.lora.register(fs)
	c.disagg.register(fs, &c.weights)
	c.obs.register(fs)
	fs.Func("http-engine", "an OpenAI-compatible HTTP engine, http://HOST:PORT (repeatable, or comma-separated): routed by approximate prefix, requests forwarded unchanged", func(v string) error {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				c.httpEngines = append(c.httpEngines, u)
			}
		}
		return nil
	})
	fs.StringVar(&c.steering, "steering", "auto", "how HTTP engines' responses reach clients: sockmap (in the kernel), splice, copy, or auto (the fastest that works here)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kvgate [flags]\n\nRoutes LLM requests to the engine holding the most of their KV cache.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fileArgs, err := configFileArgs(fs, args)
	if err != nil {
		return nil, err
	}
	// The file first, then the command line, in one parse: the command
	// line wins, and a repeatable flag collects each value once.
	if err := fs.Parse(append(fileArgs, args...)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	c.configFile = *configFile
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if c.policy, err = route.ParsePolicy(*policy); err != nil {
		return nil, err
	}
	for _, e := range strings.Split(*engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			c.engines = append(c.engines, e)
		}
	}
	if len(c.engines) > 0 && c.simEngines > 0 || len(c.engines) == 0 && c.simEngines == 0 && len(c.httpEngines) == 0 && !c.discovery.any() {
		return nil, errors.New("give --engine HOST:PORT,... or --sim-engines N (and/or --http-engine URL, --engine-dns, --engine-file, --admin-token-file)")
	}
	if len(c.httpEngines) > 0 {
		c.http.KeepRaw = true
	}
	if *apiKey != "" {
		c.apiKeys[*apiKey] = true
	}
	if *apiKeyFile != "" {
		if err := readKeys(*apiKeyFile, c.apiKeys); err != nil {
			return nil, err
		}
	}
	if c.secret, err = loadSecret("KVGATE_SECRET", *secretFile, "--engine-secret-file"); err != nil {
		return nil, err
	}
	if err := c.ring.check(append(c.discovery.sources(), c.engines...)); err != nil {
		return nil, err
	}
	if err := c.engine.check(); err != nil {
		return nil, err
	}
	if err := c.discovery.check(); err != nil {
		return nil, err
	}
	if err := c.obs.check(); err != nil {
		return nil, err
	}
	if err := c.disagg.check(); err != nil {
		return nil, err
	}
	c.http.Addr = c.listen
	if c.weights.PrefillTokensPerMs <= 0 || c.http.MaxBodyBytes <= 0 || c.http.MaxHeaderBytes <= 0 || c.retries < 0 {
		return nil, errors.New("prefill rate, body and header limits must be positive; retries not negative")
	}
	if err := c.http.Validate(); err != nil {
		return nil, err
	}
	if err := gateway.CheckParsers(c.toolParser, c.reasoningParser); err != nil {
		return nil, err
	}
	if err := c.checkModels(); err != nil {
		return nil, err
	}
	return c, nil
}

// configFileArgs reads the --config file the command line names (the
// last given) as flag arguments, nil without one. It walks args as
// fs.Parse will, so a flag's value is never taken for a flag; what it
// cannot read, fs.Parse reports.
func configFileArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	path := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := fs.Lookup(name)
		if f == nil {
			break
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) {
			if i+1 == len(args) {
				break
			}
			i++
			value = args[i]
		}
		if name == "config" {
			path = value
		}
	}
	if path == "" {
		return nil, nil
	}
	return readConfigFile(path)
}

func readConfigFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	var args []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("--config %s line %d: want name=value", path, n)
		}
		args = append(args, "--"+strings.TrimSpace(name)+"="+strings.TrimSpace(value))
	}
	return args, sc.Err()
}

// readKeys adds the keys of a file, one a line; blank lines and lines
// starting with # are skipped. A file that holds no key is an error: the
// operator asked for auth, and an empty set would turn it off.
func readKeys(path string, into map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--api-key-file: %w", err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			into[l] = true
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("--api-key-file %s holds no API key (only blank or comment lines): refusing to start with auth off", path)
	}
	return nil
}

// loadSecret reads a shared secret from $env or a file (the file wins).
// A file given but empty is an error: the operator asked for auth, and
// an empty secret would connect without it.
func loadSecret(env, file, flagName string) ([]byte, error) {
	secret, err := wire.LoadSecret(env, file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	if file != "" && len(secret) == 0 {
		return nil, fmt.Errorf("%s %s is empty: refusing to start without authentication", flagName, file)
	}
	return secret, nil
}

// checkModels refuses --model with --tokenizer and fills each model's
// options not given from the one-model flags.
func (c *config) checkModels() error {
	if len(c.models) == 0 {
		return nil
	}
	if c.tokenizerDir != "" {
		return errors.New("give --tokenizer (one tokenizer for every model the engines announce) or --model NAME=DIR (each model its own), not both")
	}
	for i := range c.models {
		m := &c.models[i]
		if m.ToolParser == "" {
			m.ToolParser = c.toolParser
		}
		if m.ReasoningParser == "" {
			m.ReasoningParser = c.reasoningParser
		}
		if m.MaxModelLen == 0 {
			m.MaxModelLen = c.maxModelLen
		}
		if err := gateway.CheckParsers(m.ToolParser, m.ReasoningParser); err != nil {
			return fmt.Errorf("--model %s: %w", m.Name, err)
		}
	}
	return nil
}
