// Command kvgate-sim is a simulated inference engine that speaks the kvgate
// wire protocol: a vLLM-like continuous-batching scheduler over a paged,
// prefix-cached KV cache, with a timing model for prefill and decode.
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

	"github.com/kvgate/kvgate/perf/sim"
	"github.com/kvgate/kvgate/wire"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	cfg, listen, logLevel, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "kvgate-sim:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel}))
	srv, err := sim.NewServer(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "kvgate-sim:", err)
		return 2
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(stderr, "kvgate-sim:", err)
		return 1
	}
	// Catch signals before announcing the address: whoever reads the log
	// line may send SIGTERM at once.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	cfg.Logger.Info("kvgate-sim serving", "addr", ln.Addr().String(), "id", cfg.ID, "model", cfg.Rank.Model,
		"block_size", cfg.Rank.BlockSize, "gpu_blocks", cfg.Rank.GPUBlocks, "cpu_blocks", cfg.Rank.CPUBlocks, "disk_blocks", cfg.Rank.DiskBlocks,
		"dp_ranks", cfg.DPRanks, "profile", cfg.Rank.Profile.Name, "speed", cfg.Speed, "role", cfg.Rank.Disagg.Role.String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-sigs:
		cfg.Logger.Info("draining")
		if err := srv.Shutdown(context.Background()); err != nil {
			cfg.Logger.Warn("drain cut short", "err", err)
		}
		return 0
	case err := <-served:
		srv.Close()
		if err != nil {
			fmt.Fprintln(stderr, "kvgate-sim:", err)
			return 1
		}
		return 0
	}
}

func parseFlags(args []string, stderr io.Writer) (sim.Config, string, slog.Level, error) {
	cfg := sim.DefaultConfig()
	fs := flag.NewFlagSet("kvgate-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7000", "TCP address to serve the wire protocol on")
	fs.StringVar(&cfg.ID, "id", cfg.ID, "engine identity announced to routers")
	fs.StringVar(&cfg.Rank.Model, "model", cfg.Rank.Model, "model name served (also enters the block hashes)")
	fs.IntVar(&cfg.Rank.BlockSize, "block-size", cfg.Rank.BlockSize, "tokens per KV block")
	fs.IntVar(&cfg.Rank.GPUBlocks, "gpu-blocks", cfg.Rank.GPUBlocks, "GPU KV capacity in blocks, per rank")
	fs.IntVar(&cfg.Rank.CPUBlocks, "cpu-blocks", 0, "CPU tier capacity in blocks, per rank (0: no CPU tier)")
	fs.IntVar(&cfg.Rank.DiskBlocks, "disk-blocks", 0, "disk tier capacity in blocks, per rank (0: no disk tier); takes what the CPU tier evicts, or the GPU's without one")
	fs.Float64Var(&cfg.Rank.CPULink.GBps, "cpu-bandwidth", cfg.Rank.CPULink.GBps, "GB/s loading CPU-tier blocks into the GPU (default: PCIe 4.0 x16, see perf/sim/tiers.go)")
	fs.DurationVar(&cfg.Rank.CPULink.Latency, "cpu-latency", cfg.Rank.CPULink.Latency, "latency of a step's load from the CPU tier")
	fs.Float64Var(&cfg.Rank.DiskLink.GBps, "disk-bandwidth", cfg.Rank.DiskLink.GBps, "GB/s loading disk-tier blocks into the GPU (default: a PCIe 4.0 x4 NVMe SSD)")
	fs.DurationVar(&cfg.Rank.DiskLink.Latency, "disk-latency", cfg.Rank.DiskLink.Latency, "latency of a step's load from the disk tier")
	fs.IntVar(&cfg.Rank.MaxRunning, "max-running", cfg.Rank.MaxRunning, "maximum sequences in the running batch")
	fs.IntVar(&cfg.Rank.MaxBatchedTokens, "max-batched-tokens", cfg.Rank.MaxBatchedTokens, "token budget per step (chunked prefill)")
	fs.IntVar(&cfg.Rank.MaxModelLen, "max-model-len", cfg.Rank.MaxModelLen, "maximum prompt plus output tokens")
	seed := fs.String("hash-seed", "0", "block hash seed (decimal or 0x hex); routers must use the same")
	profile := fs.String("profile", "default", "timing profile: default, zero, the hybrid models gptoss-like and qwen3next-like (KV cache groups), or a JSON file (see perf/sim/profile.go)")
	fs.StringVar(profile, "sim-profile", "default", "the same as --profile (the name kvgate --sim-engines and kvgate-bench use)")
	fs.Float64Var(&cfg.Speed, "speed", cfg.Speed, "time scale: 60 runs an hour of simulated GPU time in a minute")
	fs.IntVar(&cfg.DPRanks, "dp-ranks", cfg.DPRanks, "data-parallel ranks (independent schedulers and caches)")
	loras := fs.String("lora", "", "LoRA adapters as id=name,id=name")
	fs.IntVar(&cfg.MaxLoRAs, "max-loras", cfg.MaxLoRAs, "LoRA adapter slots per rank (0: every --lora adapter resident); with slots, adapters load on demand, the least recently used idle one evicted, and routers are told (ADAPTERS)")
	fs.DurationVar(&cfg.LoRALoadTime, "lora-load-time", sim.DefaultLoRALoadTime, "time to load a LoRA adapter into a slot (simulated; divided by --speed)")
	secretFile := fs.String("secret-file", "", "file holding the shared secret routers must prove (also $KVGATE_SECRET)")
	fs.DurationVar(&cfg.LoadInterval, "load-interval", cfg.LoadInterval, "period of LOAD reports (0: on request only)")
	kvEvents := fs.Bool("kv-events", true, "publish KV events and answer snapshot requests (false: routers see nothing of the cache)")
	multimodal := fs.Bool("multimodal", true, "announce MULTIMODAL and take images in GENERATE, cached by their content (false: routers send no images; wire/PROTOCOL.md 6.11)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "how long SIGTERM lets running requests finish")
	fs.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", wire.DefaultHandshakeTimeout, "a router that has not finished its handshake in this long is disconnected")
	fs.IntVar(&cfg.MaxHandshakes, "max-handshakes", wire.DefaultMaxHandshakes, "routers held before their handshake completes; at the bound the oldest is disconnected")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	role := fs.String("role", "both", "part in disaggregated serving: prefill, decode or both (wire/PROTOCOL.md 6.10)")
	cfg.Rank.Disagg.Link = sim.DefaultKVLink
	fs.Float64Var(&cfg.Rank.Disagg.Link.GBps, "kv-link-bandwidth", sim.DefaultKVLink.GBps, "GB/s of the link KV arrives over from prefill engines (--role decode; default: a 200 Gb/s RDMA NIC)")
	fs.DurationVar(&cfg.Rank.Disagg.Link.Latency, "kv-link-latency", sim.DefaultKVLink.Latency, "latency of one KV transfer from a prefill engine")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kvgate-sim [flags]\n\nA simulated inference engine serving the kvgate wire protocol.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, "", 0, err
	}
	cfg.NoKVEvents = !*kvEvents
	cfg.NoMultimodal = !*multimodal
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return cfg, "", 0, fmt.Errorf("--log-level: %w", err)
	}
	var err error
	if cfg.Rank.HashSeed, err = strconv.ParseUint(*seed, 0, 64); err != nil {
		return cfg, "", 0, fmt.Errorf("--hash-seed: %w", err)
	}
	if cfg.Rank.Disagg.Role, err = wire.ParseEngineRole(*role); err != nil {
		return cfg, "", 0, fmt.Errorf("--role: %w", err)
	}
	if cfg.Rank.Profile, err = sim.LoadProfile(*profile); err != nil {
		return cfg, "", 0, err
	}
	if cfg.LoRAs, err = parseLoRAs(*loras); err != nil {
		return cfg, "", 0, err
	}
	if secret := os.Getenv("KVGATE_SECRET"); secret != "" {
		cfg.Secret = []byte(secret)
	}
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return cfg, "", 0, fmt.Errorf("--secret-file: %w", err)
		}
		cfg.Secret = []byte(strings.TrimSpace(string(b)))
	}
	return cfg, *listen, lvl, cfg.Validate()
}

func parseLoRAs(s string) ([]wire.LoRA, error) {
	var out []wire.LoRA
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, name, ok := strings.Cut(part, "=")
		n, err := strconv.ParseUint(id, 10, 32)
		if !ok || err != nil || name == "" {
			return nil, fmt.Errorf("--lora %q: want id=name", part)
		}
		out = append(out, wire.LoRA{ID: uint32(n), Name: name})
	}
	return out, nil
}
