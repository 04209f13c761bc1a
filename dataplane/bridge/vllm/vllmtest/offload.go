package vllmtest

import "github.com/kvgate/kvgate/dataplane/bridge/vllm"

// Offloading and LoRA modes, both off by default.
//
// With WithOffload the fake keeps a bounded CPU tier, as vLLM's
// OffloadingConnector with the CPU backend does, and publishes it as that
// connector's take_events does (see ../offload.go for the vLLM source):
// BlockStored with medium "CPU", empty token_ids, no parent, no LoRA
// fields, block_size 0 or the real size, and the block's hash in its raw
// bytes form (never maybe_convert_block_hash'd: with the positional
// encoding the GPU events of the same blocks carry ints). The CPU stores
// travel in the same batch as the GPU events that evicted the blocks, ahead
// of the GPU removals; BlockRemoved with medium "CPU" says a CPU copy went.
// A block here holds one GPU block (block_size_factor 1).
//
// With WithLoRA a request whose model is an adapter's name makes blocks
// hashed with that name whose events carry lora_name, lora_id and
// extra_keys [(lora_name,)] per block, as current vLLM publishes them
// (older encodings keep only lora_id).

// offloadTier is the fake's CPU tier; guarded by Fake.mu.
type offloadTier struct {
	capacity  int // 0: off
	blockSize int
	blocks    map[vllm.Hash]*entry // GPU engine hash -> CPU copy
}

// WithOffload turns offloading on with a CPU tier of cpuBlocks blocks;
// sendBlockSize says whether its events carry the block size (newer vLLM)
// or 0 (versions that do not set it).
func WithOffload(cpuBlocks int, sendBlockSize bool) Option {
	return func(o *options) {
		o.cpuBlocks = cpuBlocks
		o.cpuBlockSize = -1 // the fake's block size, set by Start
		if !sendBlockSize {
			o.cpuBlockSize = 0
		}
	}
}

// WithLoRA serves an adapter: requests naming it as their model are its;
// vllmID is its lora_id in events (0 for none).
func WithLoRA(name string, vllmID int) Option {
	return func(o *options) {
		if o.loras == nil {
			o.loras = map[string]int{}
		}
		o.loras[name] = vllmID
	}
}

// offloadEvicted keeps the blocks just evicted from the GPU in the CPU
// tier and returns the event announcing the new copies (none when
// offloading is off or every victim had one); f.mu is held.
func (f *Fake) offloadEvicted(victims []vllm.Hash, entries []*entry) []vllm.Event {
	if f.offload.capacity == 0 {
		return nil
	}
	ev := vllm.Event{Kind: vllm.BlockStored, BlockSize: f.offload.blockSize, Medium: "CPU"}
	for i, h := range victims {
		f.tick++
		if c := f.offload.blocks[h]; c != nil {
			c.used = f.tick // already offloaded: vLLM stores a hash once
			continue
		}
		f.offload.blocks[h] = &entry{used: f.tick, raw: entries[i].raw, prefix: entries[i].prefix, lora: entries[i].lora,
			mm: entries[i].mm, prompt: entries[i].prompt}
		ev.BlockHashes = append(ev.BlockHashes, BytesHash(entries[i].raw))
	}
	if len(ev.BlockHashes) == 0 {
		return nil
	}
	return []vllm.Event{ev}
}

// trimCPU drops the least recently offloaded copies past the CPU tier's
// capacity and returns their removal; f.mu is held.
func (f *Fake) trimCPU() []vllm.Event {
	over := len(f.offload.blocks) - f.offload.capacity
	if f.offload.capacity == 0 || over <= 0 {
		return nil
	}
	ev := vllm.Event{Kind: vllm.BlockRemoved, Medium: "CPU"}
	for range over {
		var victim vllm.Hash
		var oldest uint64
		for h, e := range f.offload.blocks {
			if victim == "" || e.used < oldest {
				victim, oldest = h, e.used
			}
		}
		ev.BlockHashes = append(ev.BlockHashes, BytesHash(f.offload.blocks[victim].raw))
		delete(f.offload.blocks, victim)
	}
	return []vllm.Event{ev}
}

// CPUBlocks counts the blocks in the fake's CPU tier (0 without
// WithOffload).
func (f *Fake) CPUBlocks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.offload.blocks)
}

// CachedCPU reports whether the CPU tier holds a copy of the block of this
// engine hash.
func (f *Fake) CachedCPU(h vllm.Hash) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offload.blocks[h] != nil
}

// BothTiers counts the blocks held on the GPU and in the CPU tier at once
// (served again from their CPU copy); the fake holds Blocks() +
// CPUBlocks() - BothTiers() distinct blocks.
func (f *Fake) BothTiers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for h := range f.offload.blocks {
		if f.cache[h] != nil {
			n++
		}
	}
	return n
}

// kvOffloadInfo is what the fake's metrics say of offloading
// (WithKVOffloading, WithLMCacheGauges).
type kvOffloadInfo struct {
	gib               float64
	backend           string
	lmcacheBlockBytes int
	lmcacheDiskBytes  int
}

// WithKVOffloading makes the fake's vllm:cache_config_info say it runs
// with --kv-offloading-size gib and --kv-offloading-backend backend, as
// vLLM's CacheConfig.metrics_info labels do.
func WithKVOffloading(gib float64, backend string) Option {
	return func(o *options) { o.kvOffload.gib, o.kvOffload.backend = gib, backend }
}

// WithLMCacheGauges exports LMCache's usage gauges on the fake's /metrics:
// lmcache:local_cache_usage is the CPU tier's blocks times blockBytes,
// split over two workers' series, and lmcache:local_storage_usage is
// diskBytes.
func WithLMCacheGauges(blockBytes, diskBytes int) Option {
	return func(o *options) { o.kvOffload.lmcacheBlockBytes, o.kvOffload.lmcacheDiskBytes = blockBytes, diskBytes }
}
