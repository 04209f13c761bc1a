package vllm

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Bridge is an unmodified engine as the wire protocol's backend: requests
// go to Engine over HTTP; the engine's KV events, translated, go to every
// router as KV_EVENTS (with the bridge's own sequence numbers per rank);
// its metrics become LOAD reports; SNAPSHOT_REQUEST is answered from the
// translator's table.
type Bridge struct {
	*Engine
	T     *Translator
	Ranks int
	// Capacity is the GPU tier in blocks, for LOAD when the engine's
	// metrics do not say.
	Capacity uint64
	// FirstRank is the engine's data-parallel rank that is the bridge's
	// rank 0: non-zero for a bridge in front of one rank of vLLM's external
	// data parallelism (ExternalRankMetrics), whose events come from the
	// endpoint of that rank.
	FirstRank int
	// Tiers are the engine's CPU and disk tiers (tiers.go), their use
	// added to each LOAD; set before PollLoad.
	Tiers LowerTiers

	mu    sync.Mutex // orders KV_EVENTS and snapshots: a snapshot at seq N holds batches 1..N
	seq   []uint64
	loads atomic.Pointer[[]wire.Load]
}

// NewBridge returns a bridge over e and t for ranks data-parallel ranks.
func NewBridge(e *Engine, t *Translator, ranks int, capacity uint64) *Bridge {
	b := &Bridge{Engine: e, T: t, Ranks: ranks, Capacity: capacity, seq: make([]uint64, ranks)}
	empty := Loads(nil, ranks, capacity, 0)
	b.loads.Store(&empty)
	return b
}

// Load implements serve.Backend: the last scraped reports.
func (b *Bridge) Load() []wire.Load { return *b.loads.Load() }

// Events translates a rank's batch and sends it to every router.
func (b *Bridge) Events(rank int, batch *Batch) {
	if rank < 0 || rank >= b.Ranks {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if evs := b.T.Apply(rank, batch.Events); len(evs) > 0 {
		b.seq[rank]++
		b.Out.Broadcast(&wire.KVEvents{Seq: b.seq[rank], TimestampNano: time.Now().UnixNano(), DPRank: uint16(rank), Events: evs})
	}
}

// Lost forgets a rank's blocks after its events were lost for good and
// tells every router to forget them too; the index then refills from the
// engine's next events.
func (b *Bridge) Lost(rank int, reason string) {
	if rank < 0 || rank >= b.Ranks {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Log.Warn("KV events lost: routers told to forget this rank's blocks", "rank", rank, "blocks", b.T.Blocks(rank), "reason", reason)
	b.seq[rank]++
	b.Out.Broadcast(&wire.KVEvents{Seq: b.seq[rank], TimestampNano: time.Now().UnixNano(), DPRank: uint16(rank), Events: b.T.Reset(rank)})
	if b.Residency != nil {
		// A restarted engine has lost its runtime adapters too: read them
		// now rather than at the next --lora-interval.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = b.Residency.Sync(ctx)
		}()
	}
}

// Snapshot implements serve.Backend.
func (b *Bridge) Snapshot(conn uint64, id uint32) {
	if b.Residency != nil && b.Out.PeerFeatures(conn)&wire.FeatureAdapters != 0 {
		// Residency first: the router knows each rank's adapters before
		// their cache (PROTOCOL.md 6.9).
		if err := b.Out.SendTo(conn, b.Residency.ResidentFrames()...); err != nil {
			return
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for r := range b.Ranks {
		if err := b.Out.SendTo(conn, bridgeutil.SnapshotFrames(id, b.seq[r], uint16(r), b.T.Snapshot(r))...); err != nil {
			return
		}
	}
}

// PollLoad scrapes the engine's metrics every interval until ctx ends and
// broadcasts LOAD reports.
func (b *Bridge) PollLoad(ctx context.Context, url string, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if m, err := ScrapeMetrics(ctx, b.Client, url); err == nil {
			em := ExternalRankMetrics(m, b.FirstRank)
			loads := Loads(em, b.Ranks, b.Capacity, b.T.BlockSize())
			for r := range loads {
				b.Tiers.AddUsage(&loads[r], em[r], b.T.TierBlocks(r))
			}
			b.loads.Store(&loads)
			for i := range loads {
				b.Out.Broadcast(&loads[i])
			}
		} else if ctx.Err() == nil {
			b.Log.Debug("scraping engine metrics", "url", url, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NewEngine returns an Engine for the engine at url serving model.
func NewEngine(url, model string, loras map[uint32]string, log *slog.Logger) *Engine {
	return &Engine{URL: url, Model: model, LoRAs: loras, Client: bridgeutil.NewHTTPClient(), Log: log}
}

var _ serve.Backend = (*Bridge)(nil)
