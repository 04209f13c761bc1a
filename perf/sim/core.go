package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Errors of Core.Add.
var (
	ErrDuplicate  = errors.New("sim: request key already in use")
	ErrTooLong    = errors.New("sim: prompt does not fit the model length or the KV cache")
	ErrBadRequest = errors.New("sim: invalid request")
)

// Core is one rank of a simulated engine: a vLLM-like continuous-batching
// scheduler over a paged, prefix-cached KV block pool, advanced one step at a
// time. It has no clock and no goroutines: Step says how long the step took
// on the simulated GPU, and the caller decides whether to sleep (a live
// engine) or advance virtual time (a cluster simulation). Not safe for
// concurrent use.
type Core struct {
	cfg      RankConfig
	hasher   *kvstore.Hasher
	blocks   *blockManager
	waiting  []*Request
	running  []*Request
	byKey    map[RequestKey]*Request
	arrivals uint64
	stats    CoreStats
	// backlog is, per lower tier, how long its link is busy with loads
	// already started (loads of one tier queue on its link).
	backlog [kvstore.NumTiers]time.Duration
	// hyb keeps a hybrid model's per-group tables (Profile.Groups); nil
	// for a model with one KV cache.
	hyb *hybrid
	// batch is Step's array of scheduled requests, reused.
	batch []scheduled
}

// CoreStats are counters since the core started.
type CoreStats struct {
	Steps, PrefillTokens, CachedTokens, PromptTokens, GeneratedTokens, Preemptions, CPULoads, DiskLoads int
	Busy                                                                                                time.Duration
	// TransferredBlocks are the KV blocks received from prefill engines (disagg.go).
	TransferredBlocks int
}

// NewCore returns an idle rank.
func NewCore(cfg RankConfig) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: cfg.BlockSize, Seed: cfg.HashSeed, Model: cfg.Model})
	if err != nil {
		return nil, err
	}
	if cfg.CPULink == (TierLink{}) {
		cfg.CPULink = DefaultCPULink
	}
	if cfg.DiskLink == (TierLink{}) {
		cfg.DiskLink = DefaultDiskLink
	}
	c := &Core{cfg: cfg, hasher: h, blocks: newBlockManager(cfg.GPUBlocks, cfg.CPUBlocks, cfg.DiskBlocks), byKey: make(map[RequestKey]*Request)}
	if len(cfg.Profile.Groups) > 0 {
		if cfg.CPUBlocks > 0 || cfg.DiskBlocks > 0 {
			return nil, fmt.Errorf("sim: profile %q has KV cache groups: lower tiers (cpu %d, disk %d blocks) are not modelled for hybrid models",
				cfg.Profile.Name, cfg.CPUBlocks, cfg.DiskBlocks)
		}
		if c.hyb, err = newHybrid(cfg.Profile.Groups, cfg.BlockSize); err != nil {
			return nil, err
		}
		c.blocks.setGroups(c.hyb.groups)
	}
	return c, nil
}

// Hasher returns the block hasher of this rank.
func (c *Core) Hasher() *kvstore.Hasher { return c.hasher }

// Add queues a request.
func (c *Core) Add(r *Request) error {
	if _, dup := c.byKey[r.Key]; dup {
		return ErrDuplicate
	}
	if r.promptLen == 0 {
		return fmt.Errorf("%w: empty prompt", ErrBadRequest)
	}
	if r.promptLen >= c.cfg.MaxModelLen || (r.promptLen+1+c.cfg.BlockSize-1)/c.cfg.BlockSize > c.cfg.GPUBlocks {
		return fmt.Errorf("%w: %d prompt tokens, max model len %d, %d blocks of %d", ErrTooLong,
			r.promptLen, c.cfg.MaxModelLen, c.cfg.GPUBlocks, c.cfg.BlockSize)
	}
	hs, err := c.hasher.Hash(r.hashes, r.tokens, &r.Keys)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	r.hashes = hs
	r.target = len(r.tokens)
	c.byKey[r.Key] = r
	c.waiting = append(c.waiting, r)
	return nil
}

// Cancel removes a request at once, freeing its blocks, and returns its
// last output (finish reason cancelled).
func (c *Core) Cancel(key RequestKey) (Output, bool) {
	r, ok := c.byKey[key]
	if !ok {
		return Output{}, false
	}
	c.waiting = slices.DeleteFunc(c.waiting, func(x *Request) bool { return x == r })
	c.running = slices.DeleteFunc(c.running, func(x *Request) bool { return x == r })
	return c.finish(r, wire.FinishCancelled), true
}

func (c *Core) finish(r *Request, reason wire.FinishReason) Output {
	c.releaseBlocks(r)
	delete(c.byKey, r.Key)
	r.finished = true
	return Output{Key: r.Key, Finish: reason, PromptTokens: r.promptLen, CompletionTokens: r.generated, Cached: r.cached}
}

// Idle reports whether the rank has nothing to run.
func (c *Core) Idle() bool { return len(c.waiting) == 0 && len(c.running) == 0 }

// Snapshot returns the whole cached block set as STORED events.
func (c *Core) Snapshot() []kvstore.Event { return c.blocks.snapshot() }

// Stats returns the core's counters.
func (c *Core) Stats() CoreStats { return c.stats }

// Check verifies the block accounting (no leaked or double-freed block,
// used + free = capacity, cache map consistent).
func (c *Core) Check() error {
	var tables [][]int32
	for _, r := range c.byKey {
		tables = append(tables, r.table)
		if t := c.tablesOf(r); t != nil {
			tables = append(tables, t.blocks())
		}
	}
	return c.blocks.check(tables)
}

// releaseBlocks drops all of r's blocks.
func (c *Core) releaseBlocks(r *Request) {
	if c.hyb != nil {
		c.hyb.release(c, r)
	}
	c.blocks.release(r.table)
	r.table = nil
}

// tablesOf returns r's per-group tables of a hybrid model, or nil.
func (c *Core) tablesOf(r *Request) *hybridTables {
	if c.hyb == nil {
		return nil
	}
	return c.hyb.tables[r]
}
