// Command kvgate-bridge puts an unmodified vLLM or SGLang engine behind
// kvgate: it serves the wire protocol to routers and drives the engine over
// its OpenAI-compatible HTTP API with token-id prompts, translates the
// engine's ZMQ KV events into kvgate block hashes, and reports the engine's
// load from its Prometheus metrics.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// config is the bridge's command line.
type config struct {
	listen, adminListen, engineURL, kvEvents, kvTopic, replay, model, id, metricsURL string
	blockSize, dpRanks, maxBatched                                                   int
	hashSeed, gpuBlocks                                                              uint64
	loras                                                                            []vllm.LoRA
	secret                                                                           []byte
	metricsEvery, drain                                                              time.Duration
	logLevel                                                                         slog.Level
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("kvgate-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7100", "wire-protocol address routers connect to")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:9100", "admin HTTP address: /metrics, /debug/pprof/")
	fs.StringVar(&c.engineURL, "engine-url", "", "the engine's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000 (required)")
	fs.StringVar(&c.kvEvents, "kv-events", "", "the engine's ZMQ KV event publisher, e.g. tcp://127.0.0.1:5557 (vLLM --kv-events-config endpoint)")
	fs.StringVar(&c.kvTopic, "kv-topic", "", "ZMQ topic prefix of the KV events")
	fs.StringVar(&c.replay, "replay", "", "the engine's ZMQ replay socket, e.g. tcp://127.0.0.1:5558 (recovers missed batches)")
	fs.StringVar(&c.model, "model", "", "the model name the engine serves (required)")
	fs.StringVar(&c.id, "id", host+"-bridge", "engine id announced to routers")
	fs.IntVar(&c.blockSize, "block-size", 16, "the engine's KV block size in tokens (vLLM --block-size)")
	fs.Uint64Var(&c.hashSeed, "hash-seed", 0, "seed of kvgate's block hashes (routers take it from the handshake)")
	fs.IntVar(&c.dpRanks, "dp-ranks", 1, "data-parallel ranks; rank r's events come from the endpoint's port + r, as vLLM publishes them")
	fs.IntVar(&c.maxBatched, "max-batched-tokens", 8192, "the engine's tokens per step (vLLM --max-num-batched-tokens)")
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
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.engineURL == "" || c.model == "" {
		return nil, errors.New("--engine-url and --model are required")
	}
	c.engineURL = strings.TrimSuffix(c.engineURL, "/")
	if c.metricsURL == "" {
		c.metricsURL = c.engineURL + "/metrics"
	}
	if c.blockSize <= 0 || c.blockSize > kvstore.MaxBlockSize || c.dpRanks < 1 {
		return nil, fmt.Errorf("--block-size must be 1..%d and --dp-ranks at least 1", kvstore.MaxBlockSize)
	}
	if err := c.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, err
	}
	var err error
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, addr, admin, err := start(ctx, c, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	log.Info("bridge serving", "addr", addr, "admin", admin, "engine", c.engineURL, "kv_events", c.kvEvents, "model", c.model)
	sig := <-sigs
	log.Info("draining", "signal", sig.String())
	dctx, dcancel := context.WithTimeout(context.Background(), c.drain)
	defer dcancel()
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain cut short", "err", err)
	}
	return 0
}

// start wires the bridge together and starts serving.
func start(ctx context.Context, c *config, log *slog.Logger) (srv *serve.Server, addr, admin string, err error) {
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: c.blockSize, Seed: c.hashSeed, Model: c.model})
	if err != nil {
		return nil, "", "", err
	}
	names := map[uint32]string{}
	var loras []wire.LoRA
	for _, l := range c.loras {
		names[l.WireID] = l.Name
		loras = append(loras, wire.LoRA{ID: l.WireID, Name: l.Name})
	}
	e := vllm.NewEngine(c.engineURL, c.model, names, log)
	capacity := c.gpuBlocks
	if capacity == 0 {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		if m, err := vllm.ScrapeMetrics(sctx, e.Client, c.metricsURL); err == nil && m[0] != nil {
			capacity = m[0].GPUBlocks
		}
		scancel()
	}
	b := vllm.NewBridge(e, vllm.NewTranslator(h, c.loras), c.dpRanks, capacity)
	hs := wire.Handshake{Role: wire.RoleEngine, HashScheme: wire.HashXXH3Chained, ID: c.id,
		Features: wire.FeatureSnapshot | wire.FeatureLoadRequest, BlockSize: uint32(c.blockSize),
		MaxBatchedTokens: uint32(c.maxBatched), HashSeed: c.hashSeed, DPRanks: uint16(c.dpRanks),
		Models: []string{c.model}, LoRAs: loras, Tiers: []wire.TierCapacity{{Tier: wire.TierGPU, Blocks: capacity}}}
	srv = serve.New(serve.Config{Handshake: hs, Secret: c.secret, DrainTimeout: c.drain, Logger: log}, b)
	e.Out = srv
	var subs []*vllm.Subscriber
	if c.kvEvents != "" {
		for r := range c.dpRanks {
			ep, err := vllm.RankEndpoint(c.kvEvents, r)
			if err != nil {
				return nil, "", "", err
			}
			replay, err := vllm.RankEndpoint(c.replay, r)
			if err != nil {
				return nil, "", "", err
			}
			subs = append(subs, &vllm.Subscriber{Endpoint: ep, ReplayEndpoint: replay, Topic: c.kvTopic, Log: log.With("rank", r),
				Batch: func(_ uint64, batch *vllm.Batch) { b.Events(r, batch) },
				Lost:  func(reason string) { b.Lost(r, reason) }})
		}
	}
	if admin, err = serveAdmin(c.adminListen, b, subs, srv); err != nil {
		return nil, "", "", err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return nil, "", "", err
	}
	go func() { _ = srv.Serve(ln) }()
	go b.PollLoad(ctx, c.metricsURL, c.metricsEvery)
	for r, sub := range subs {
		go func() {
			if err := sub.Run(ctx); err != nil {
				log.Error("KV event subscriber stopped", "rank", r, "err", err)
			}
		}()
	}
	return srv, ln.Addr().String(), admin, nil
}
