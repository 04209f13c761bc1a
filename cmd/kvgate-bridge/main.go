// Command kvgate-bridge puts an unmodified engine behind kvgate: it serves
// the wire protocol to routers and drives the engine over HTTP with
// token-id prompts. --engine-kind says which engine:
//
//   - vllm (the default): its OpenAI-compatible API, its ZMQ KV events
//     translated into kvgate block hashes, its load from its Prometheus
//     metrics (vllm.go);
//   - sglang: SGLang's native /generate with the same ZMQ KV events
//     (SGLang's copy of vLLM's publisher) and its scheduler metrics. The
//     server is checked first (/get_server_info: --model against its
//     --served-model-name, --block-size against its --page-size,
//     --dp-ranks against its --dp-size, --kv-events against its
//     --kv-events-config): one that differs is refused, and one that does
//     not answer yet is waited for, for --connect-timeout (sglang.go);
//   - llamacpp: llama.cpp's llama-server, natively: /completion with
//     cache_prompt and token-id streams, KV events of the bridge's own from
//     what its requests and /slots say, load from /slots and /metrics,
//     capacity from /props (llamacpp.go). The server is checked first
//     (llama.cpp, --model, the tokenizer given by --tokenizer): one that
//     differs is refused with a log line that says how, and the bridge
//     exits 1 without ever accepting a router; one that does not answer
//     yet is retried, without accepting routers, for --connect-timeout.
//
// With vLLM, --lora-adapter NAME=SOURCE and --max-loras make the bridge
// load adapters at run time, within the engine's slots, and report their
// residency to routers (lora.go); --cpu-blocks, --disk-blocks,
// --block-bytes and the tier links describe the engine's lower KV tiers
// in the handshake and in LOAD (tiers.go); --role prefill or decode makes
// the bridge one side of vLLM's prefill/decode disaggregation through its
// NixlConnector (vLLM started as kv_producer or kv_consumer), announced to
// routers, which split requests across the two (disagg.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// errRefused marks an engine refused at connect: not the kind, model or
// tokenizer the flags say.
var errRefused = errors.New("engine refused")

// Engine kinds, the values of --engine-kind.
const (
	kindVLLM     = "vllm"
	kindSGLang   = "sglang"
	kindLlamaCpp = "llamacpp"
)

// config is the bridge's command line.
type config struct {
	listen, adminListen, engineURL, kvEvents, kvTopic, replay, model, id, metricsURL string
	engineKind, tokenizerDir                                                         string
	blockSize, dpRanks, dpRank, maxBatched, offloadBlockSize, maxModelLen            int
	hashSeed, gpuBlocks                                                              uint64
	loras                                                                            []vllm.LoRA
	groups                                                                           []wire.Group // --kv-cache-groups
	secret                                                                           []byte
	metricsEvery, slotsEvery, connectTimeout, drain                                  time.Duration
	logLevel                                                                         slog.Level
	loraFlags
	tierFlags
	disaggFlags
	mmFlags
	tiers vllm.LowerTiers // from tierFlags
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("kvgate-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7100", "wire-protocol address routers connect to")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:9100", "admin HTTP address: /metrics, /debug/pprof/")
	fs.StringVar(&c.engineKind, "engine-kind", kindVLLM, "the engine: vllm (vLLM's OpenAI API and ZMQ KV events), sglang (SGLang's /generate and ZMQ KV events) or llamacpp (llama.cpp's llama-server, started with --metrics and --slots)")
	fs.StringVar(&c.engineURL, "engine-url", "", "the engine's base URL, e.g. http://127.0.0.1:8000 (required)")
	fs.StringVar(&c.tokenizerDir, "tokenizer", "", "llamacpp: directory with the tokenizer.json routers tokenize with, checked against the server's /tokenize (default: the built-in Qwen3 tokenizer)")
	fs.DurationVar(&c.slotsEvery, "slots-interval", 250*time.Millisecond, "llamacpp: how often /slots is read for the bridge's KV events")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 5*time.Minute, "llamacpp, sglang: how long to wait for the server to answer before giving up (0: forever)")
	fs.StringVar(&c.kvEvents, "kv-events", "", "the engine's ZMQ KV event publisher, e.g. tcp://127.0.0.1:5557 (vLLM --kv-events-config endpoint)")
	fs.StringVar(&c.kvTopic, "kv-topic", "", "ZMQ topic prefix of the KV events")
	fs.StringVar(&c.replay, "replay", "", "the engine's ZMQ replay socket, e.g. tcp://127.0.0.1:5558 (recovers missed batches)")
	fs.StringVar(&c.model, "model", "", "the model name the engine serves (required)")
	fs.StringVar(&c.id, "id", host+"-bridge", "engine id announced to routers")
	fs.IntVar(&c.blockSize, "block-size", 16, "the engine's KV block size in tokens (vLLM --block-size, SGLang --page-size)")
	groups := fs.String("kv-cache-groups", "", "vLLM hybrid models: the KV cache groups in vLLM's order, announced to routers and indexed apart, e.g. sliding_window:128,full (gpt-oss) or mamba,mamba,mamba,full (Qwen3-Next); each may end in @BLOCK_SIZE (default: one cache; only the first full-attention group is then indexed)")
	fs.IntVar(&c.offloadBlockSize, "offload-block-size", 0, "vLLM offloading: the offloaded block size in tokens (kv_connector_extra_config block_size), for events that say 0; 0: one GPU block")
	fs.Uint64Var(&c.hashSeed, "hash-seed", 0, "seed of kvgate's block hashes (routers take it from the handshake)")
	fs.IntVar(&c.dpRanks, "dp-ranks", 1, "data-parallel ranks; rank r's events come from the endpoint's port + r, as vLLM publishes them")
	fs.IntVar(&c.dpRank, "dp-rank", -1, "vLLM external data parallelism (an API server per rank, --data-parallel-external-lb): the --data-parallel-rank of the server at --engine-url, fronted as an engine of one rank; its events come from the endpoint's port + rank and its metrics are that rank's (default --id: HOST-bridge-dpRANK; give each rank's bridge its own --listen)")
	fs.IntVar(&c.maxBatched, "max-batched-tokens", 8192, "the engine's tokens per step (vLLM --max-num-batched-tokens)")
	fs.IntVar(&c.maxModelLen, "max-model-len", 0, "the engine's context, prompt plus output tokens, announced to routers so they refuse what it cannot take (0: vLLM's max_model_len from /v1/models at start, llama.cpp's slot n_ctx)")
	fs.Uint64Var(&c.gpuBlocks, "gpu-blocks", 0, "GPU KV blocks of the engine (0: read vllm:cache_config_info from its metrics)")
	fs.StringVar(&c.metricsURL, "metrics-url", "", "the engine's Prometheus metrics (default ENGINE-URL/metrics)")
	fs.DurationVar(&c.metricsEvery, "metrics-interval", 500*time.Millisecond, "how often LOAD is read from the metrics")
	fs.DurationVar(&c.drain, "drain-timeout", 30*time.Second, "SIGTERM: how long running requests may finish")
	secretFile := fs.String("secret-file", "", "shared secret routers must prove (also $KVGATE_SECRET)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Func("lora", "an adapter the engine serves: NAME or NAME=VLLM_LORA_ID (repeatable; announced to routers as ids 1, 2, ...)", func(s string) error {
		name, id, _ := strings.Cut(s, "=")
		l := vllm.LoRA{Name: name, WireID: uint32(len(c.loras) + 1)}
		if id != "" {
			n, err := strconv.Atoi(id)
			if err != nil {
				return err
			}
			l.VLLMID = n
		}
		c.loras = append(c.loras, l)
		return nil
	})
	c.registerLoRA(fs)
	c.registerTiers(fs)
	c.registerDisagg(fs)
	c.registerMultimodal(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.engineURL == "" || c.model == "" {
		return nil, errors.New("--engine-url and --model are required")
	}
	if err := c.checkKind(fs); err != nil {
		return nil, err
	}
	if err := c.checkDisagg(); err != nil {
		return nil, err
	}
	if err := c.checkMultimodal(); err != nil {
		return nil, err
	}
	c.engineURL = strings.TrimSuffix(c.engineURL, "/")
	if c.metricsURL == "" {
		c.metricsURL = c.engineURL + "/metrics"
	}
	if c.blockSize <= 0 || c.blockSize > kvstore.MaxBlockSize || c.dpRanks < 1 {
		return nil, fmt.Errorf("--block-size must be 1..%d and --dp-ranks at least 1", kvstore.MaxBlockSize)
	}
	if err := c.checkDPRank(fs, host); err != nil {
		return nil, err
	}
	gs, gerr := vllm.ParseGroups(*groups, c.blockSize)
	if gerr != nil {
		return nil, fmt.Errorf("--kv-cache-groups: %w", gerr)
	}
	c.groups = gs
	if c.offloadBlockSize < 0 || c.offloadBlockSize%c.blockSize != 0 {
		return nil, fmt.Errorf("--offload-block-size %d: a multiple of --block-size %d", c.offloadBlockSize, c.blockSize)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, err
	}
	var err error
	if c.tiers, err = c.lowerTiers(); err != nil {
		return nil, err
	}
	if c.secret, err = wire.LoadSecret("KVGATE_SECRET", *secretFile); err != nil {
		return nil, fmt.Errorf("--secret-file: %w", err)
	}
	return c, nil
}

func run(args []string, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "kvgate-bridge:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() { // a signal while the engine is awaited stops the wait
		select {
		case <-sigs:
			cancel()
		case <-started:
		}
	}()
	srv, addr, admin, err := start(ctx, c, log)
	close(started)
	if err != nil && ctx.Err() != nil {
		log.Info("stopped by a signal before the engine answered", "engine", c.engineURL)
		return 0
	}
	if errors.Is(err, errRefused) {
		log.Error("engine refused: it is not what the flags say; no router was accepted", "engine_kind", c.engineKind, "engine", c.engineURL, "err", err)
		return 1
	}
	if err != nil {
		log.Error("start failed", "engine_kind", c.engineKind, "engine", c.engineURL, "err", err)
		return 1
	}
	log.Info("bridge serving", "addr", addr, "admin", admin, "engine_kind", c.engineKind, "engine", c.engineURL, "kv_events", c.kvEvents, "model", c.model)
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-ctx.Done(): // a signal came as start returned
		sig = syscall.SIGTERM
	}
	log.Info("draining", "signal", sig.String())
	dctx, dcancel := context.WithTimeout(context.Background(), c.drain)
	defer dcancel()
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain cut short", "err", err)
	}
	return 0
}

// checkKind refuses an engine kind kvgate-bridge does not know, and the
// flags of one kind given with another.
func (c *config) checkKind(fs *flag.FlagSet) error {
	switch c.engineKind {
	case kindVLLM:
		return nil
	case kindSGLang:
		return c.checkSGLang(fs)
	case kindLlamaCpp:
	default:
		return fmt.Errorf("--engine-kind %q: want %s, %s or %s", c.engineKind, kindVLLM, kindSGLang, kindLlamaCpp)
	}
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "kv-events", "kv-topic", "replay", "lora", "lora-adapter", "max-loras", "gpu-blocks", "metrics-url", "offload-block-size":
			bad = append(bad, "--"+f.Name)
		}
		if slices.Contains(tierFlagNames, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if c.dpRanks != 1 {
		bad = append(bad, "--dp-ranks")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: not with --engine-kind llamacpp (llama.cpp publishes no KV events, serves no adapters through the bridge, has one rank and no lower KV tiers, and its capacity and metrics come from the server itself)", strings.Join(bad, ", "))
	}
	return nil
}

// start wires the bridge for its engine kind together and starts serving.
func start(ctx context.Context, c *config, log *slog.Logger) (srv *serve.Server, addr, admin string, err error) {
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: c.blockSize, Seed: c.hashSeed, Model: c.model})
	if err != nil {
		return nil, "", "", err
	}
	var b backend
	if c.engineKind == kindLlamaCpp {
		b, err = startLlamaCpp(ctx, c, h, log)
	} else {
		b, err = startVLLM(ctx, c, h, log)
	}
	if err != nil {
		return nil, "", "", err
	}
	srv = serve.New(serve.Config{Handshake: b.handshake(), Secret: c.secret, DrainTimeout: c.drain, Logger: log}, b)
	b.setOut(srv)
	if admin, err = serveAdmin(c.adminListen, b.collectors(srv.Routers)); err != nil {
		return nil, "", "", err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return nil, "", "", err
	}
	go func() { _ = srv.Serve(ln) }()
	b.run(ctx)
	return srv, ln.Addr().String(), admin, nil
}

// backend is a bridge of either kind as start wires it.
type backend interface {
	serve.Backend
	// handshake is what the bridge announces to routers.
	handshake() wire.Handshake
	// setOut gives the bridge its server, before it serves.
	setOut(*serve.Server)
	// collectors are its Prometheus metrics.
	collectors(routers func() int) []prometheus.Collector
	// run starts its goroutines (polls, subscribers) until ctx ends.
	run(ctx context.Context)
}

// handshake is the part of the handshake both kinds share.
func (c *config) handshake(capacity uint64) wire.Handshake {
	return wire.Handshake{Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained, ID: c.id,
		Features: wire.FeatureSnapshot | wire.FeatureLoadRequest | wire.FeatureTrace, BlockSize: uint32(c.blockSize),
		MaxBatchedTokens: uint32(c.maxBatched), HashSeed: c.hashSeed, DPRanks: uint16(c.dpRanks),
		Models: []string{c.model}, Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: capacity}},
		MaxModelLen: uint32(max(c.maxModelLen, 0))}
}
