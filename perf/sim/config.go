package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Config configures a simulated engine server.
type Config struct {
	// ID names the engine in handshakes and logs.
	ID string
	// Rank is the configuration of every data-parallel rank.
	Rank RankConfig
	// DPRanks is the number of data-parallel ranks (independent schedulers
	// and caches behind one connection).
	DPRanks int
	// LoRAs are the adapters the engine serves: all resident when MaxLoRAs
	// is 0, else loaded on demand.
	LoRAs []wire.LoRA
	// MaxLoRAs, when above 0, gives each rank that many adapter slots
	// (vLLM's --max-loras): a request for an adapter that is not resident
	// waits for its load (LoRALoadTime, 0: DefaultLoRALoadTime; divided by
	// Speed), the least recently used idle adapter is evicted for it, and
	// the engine announces wire.FeatureAdapters and sends ADAPTERS.
	MaxLoRAs     int
	LoRALoadTime time.Duration
	// Speed divides every simulated duration: 60 runs an hour in a minute.
	Speed float64
	// LoadInterval is the period of LOAD reports (0: only on request).
	LoadInterval time.Duration
	// NoKVEvents makes the engine publish no KV events and answer no
	// snapshot requests (it does not claim FeatureSnapshot), like an
	// engine whose cache routers cannot see.
	NoKVEvents bool
	// NoSampling makes the engine announce no wire.FeatureSampling, as an
	// engine from before GENERATE's sampling section (tests of routing
	// around it).
	NoSampling bool
	// NoMultimodal makes the engine announce no wire.FeatureMultimodal:
	// routers send it no images, and wire/serve refuses any it gets.
	NoMultimodal bool
	// Secret enables challenge-response authentication of routers.
	Secret []byte
	// DrainTimeout bounds how long Shutdown lets running requests finish.
	DrainTimeout time.Duration
	// Limits bound what routers may send.
	Limits wire.Limits
	// HandshakeTimeout and MaxHandshakes bound routers that have not
	// finished their handshake (serve.Config; 0: wire's defaults).
	HandshakeTimeout time.Duration
	MaxHandshakes    int
	Logger           *slog.Logger
}

// DefaultConfig returns a small engine that fits a laptop's worth of
// simulation: 16-token blocks, 8,192 GPU blocks (131,072 tokens), 256
// sequences, 8,192 batched tokens per step, the default timing profile.
func DefaultConfig() Config {
	return Config{
		ID: "sim-0",
		Rank: RankConfig{
			Model: "kvgate/sim", BlockSize: 16, HashSeed: 0, GPUBlocks: 8192, MaxRunning: 256,
			MaxBatchedTokens: 8192, MaxModelLen: 131072, EOS: DefaultEOS, Profile: DefaultProfile,
			CPULink: DefaultCPULink, DiskLink: DefaultDiskLink,
		},
		DPRanks:      1,
		Speed:        1,
		LoadInterval: 50 * time.Millisecond,
		DrainTimeout: 30 * time.Second,
		Limits:       wire.DefaultLimits(),
	}
}

// Validate reports every setting the engine cannot run with.
func (c *Config) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("sim: empty engine id"))
	}
	if err := c.Rank.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.DPRanks < 1 || c.DPRanks > 1024 {
		errs = append(errs, fmt.Errorf("sim: %d data-parallel ranks, want 1..1024", c.DPRanks))
	}
	if c.MaxLoRAs < 0 || c.MaxLoRAs > 0xffff || c.LoRALoadTime < 0 {
		errs = append(errs, fmt.Errorf("sim: %d LoRA slots, load time %v: want 0..65535 and not negative", c.MaxLoRAs, c.LoRALoadTime))
	}
	if c.Speed <= 0 {
		errs = append(errs, fmt.Errorf("sim: speed %v must be positive", c.Speed))
	}
	for _, l := range c.LoRAs {
		if l.ID == 0 {
			errs = append(errs, fmt.Errorf("sim: LoRA %q has id 0, reserved for the base model", l.Name))
		}
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RankConfig configures one data-parallel rank of a simulated engine.
type RankConfig struct {
	Model      string
	BlockSize  int
	HashSeed   uint64
	GPUBlocks  int
	CPUBlocks  int // 0: no CPU tier
	DiskBlocks int // 0: no disk tier
	// CPULink and DiskLink are how the tiers load back into the GPU (zero:
	// DefaultCPULink, DefaultDiskLink).
	CPULink, DiskLink TierLink
	MaxRunning        int // sequences in the running batch
	MaxBatchedTokens  int // token budget per step (chunked prefill)
	MaxModelLen       int // prompt plus output, at most
	EOS               uint32
	// NoRandomEOS makes sequences end only at max_tokens, a stop token or
	// the context, never at the random EOS (1 in 256 tokens) a request
	// without ignore_eos otherwise meets: for tests that need a known
	// length through an API that cannot ask for ignore_eos (Anthropic's).
	NoRandomEOS bool
	Profile     Profile
	// Tools, when set, answers prompts that offer tools with tool calls
	// (toolcall.go); nil generates as ever.
	Tools *ToolCalls
	// Disagg is the rank's part in disaggregated serving (disagg.go).
	Disagg Disagg
}

// Validate reports settings the scheduler cannot run with.
func (c *RankConfig) Validate() error {
	var errs []error
	if c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("block size %d", c.BlockSize))
	}
	if c.GPUBlocks < 1 {
		errs = append(errs, fmt.Errorf("gpu blocks %d", c.GPUBlocks))
	}
	if c.MaxRunning < 1 || c.MaxBatchedTokens < 1 || c.MaxModelLen < 1 {
		errs = append(errs, fmt.Errorf("max running %d, max batched tokens %d, max model len %d: all must be positive",
			c.MaxRunning, c.MaxBatchedTokens, c.MaxModelLen))
	}
	if c.CPUBlocks < 0 || c.DiskBlocks < 0 {
		errs = append(errs, fmt.Errorf("cpu blocks %d, disk blocks %d", c.CPUBlocks, c.DiskBlocks))
	}
	for _, l := range []struct {
		name string
		link TierLink
	}{{"cpu", c.CPULink}, {"disk", c.DiskLink}} {
		if l.link != (TierLink{}) {
			if err := l.link.validate(l.name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, c.Disagg.validate(len(c.Profile.Groups))) // disagg.go
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}
