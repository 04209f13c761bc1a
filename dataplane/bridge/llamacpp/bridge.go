package llamacpp

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// Bridge is a llama.cpp server as the wire protocol's backend: requests go
// to Engine; what they and the /slots polls say of the cache becomes
// KV_EVENTS (Tracker), sent to every router with the bridge's own
// sequence numbers; /slots and /metrics become LOAD reports;
// SNAPSHOT_REQUEST is answered from the tracker's blocks.
//
// mu guards T and seq and is held while the events of a change are sent,
// so KV_EVENTS go out in sequence order and a snapshot at seq N holds the
// changes 1..N. The request goroutines (Engine's relays) and Poll's
// goroutine take it; nothing is called under it but the tracker and
// serve.Server's Broadcast and SendTo.
type Bridge struct {
	*Engine
	// BlockSize is kvgate's block size, the unit of LOAD's KV figures.
	BlockSize int
	// Capacity is the GPU tier in blocks (slots × slot context), for LOAD
	// when /slots does not say.
	Capacity uint64

	mu  sync.Mutex
	T   *Tracker
	seq uint64

	loads       atomic.Pointer[[]wire.Load]
	pollsFailed atomic.Uint64
}

// grace is how long a slot an unattributed task used keeps its blocks
// waiting for a request's last event; lostAfter how long /slots may fail
// before the bridge forgets the cache (the server restarted or is gone).
const (
	grace     = time.Second
	lostAfter = 5 * time.Second
)

// NewBridge returns a bridge over e for the server s, hashing with h.
func NewBridge(e *Engine, h *kvstore.Hasher, s *Server) *Bridge {
	bs := h.BlockSize()
	b := &Bridge{Engine: e, BlockSize: bs, Capacity: uint64(s.Slots()) * uint64(s.SlotContext()/bs),
		T: NewTracker(h, s.Slots(), grace)}
	e.cache = b
	empty := []wire.Load{LoadOf(nil, Metrics{}, bs, b.Capacity)}
	b.loads.Store(&empty)
	return b
}

// emit applies a change to the tracker and sends its events.
func (b *Bridge) emit(change func() []wire.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if evs := change(); len(evs) > 0 && b.Out != nil {
		b.seq++
		b.Out.Broadcast(&wire.KVEvents{Seq: b.seq, TimestampNano: time.Now().UnixNano(), Events: evs})
	}
}

func (b *Bridge) held(id uint64, prompt []uint32) {
	b.emit(func() []wire.Event { return b.T.Hold(id, prompt) })
}

func (b *Bridge) settled(id uint64, slot int, tokens []uint32, cached int) {
	b.emit(func() []wire.Event { return b.T.Settle(id, slot, tokens, cached) })
}

func (b *Bridge) ended(id uint64, tokens []uint32) {
	b.emit(func() []wire.Event { return b.T.End(id, time.Now(), tokens...) })
}

// Load implements serve.Backend: the last polled report.
func (b *Bridge) Load() []wire.Load { return *b.loads.Load() }

// Snapshot implements serve.Backend.
func (b *Bridge) Snapshot(conn uint64, id uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.Out.SendTo(conn, bridgeutil.SnapshotFrames(id, b.seq, 0, b.T.Snapshot())...)
}

// Blocks counts the blocks the bridge believes the server holds.
func (b *Bridge) Blocks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.T.Blocks()
}

// PollsFailed counts /slots polls that failed.
func (b *Bridge) PollsFailed() uint64 { return b.pollsFailed.Load() }

// Poll reads /slots every slotsEvery and /metrics every loadEvery until ctx
// ends: slots into the tracker, both into LOAD reports sent to every
// router. When /slots fails for lostAfter the cache is forgotten and
// routers are refused (serve.Server.Suspend) until it answers again.
func (b *Bridge) Poll(ctx context.Context, slotsEvery, loadEvery time.Duration) {
	t := time.NewTicker(slotsEvery)
	defer t.Stop()
	var lastLoad, failing time.Time
	forgot := false // the cache was forgotten in this run of failures
	for {
		b.mu.Lock()
		since := b.T.Epoch()
		b.mu.Unlock()
		slots, err := b.fetchSlots(ctx)
		now := time.Now()
		switch {
		case err == nil:
			if forgot {
				b.Out.Resume() // the server answers again: routers reconnect and ask for a snapshot
			}
			failing, forgot = time.Time{}, false
			b.emit(func() []wire.Event { return b.T.Observe(since, slots, now) })
		case ctx.Err() != nil:
			return
		default:
			b.pollsFailed.Add(1)
			b.Log.Debug("polling llama.cpp's /slots", "err", err)
			if failing.IsZero() {
				failing = now
			} else if now.Sub(failing) > lostAfter && !forgot {
				b.Log.Warn("llama.cpp's /slots keeps failing: routers told to forget its blocks and refused until it answers",
					"since", failing, "err", err)
				b.emit(b.T.Clear)
				// Routers should see a down engine, not a ready one that
				// fails every request.
				b.Out.Suspend("llama.cpp unreachable: " + err.Error())
				forgot = true
			}
		}
		if now.Sub(lastLoad) >= loadEvery {
			m, merr := b.fetchMetrics(ctx)
			if err == nil || merr == nil {
				loads := []wire.Load{LoadOf(slots, m, b.BlockSize, b.Capacity)}
				b.loads.Store(&loads)
				b.Out.Broadcast(&loads[0])
				lastLoad = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Bridge) fetchSlots(ctx context.Context) ([]Slot, error) {
	body, err := call(ctx, b.Client, "GET", b.URL, "/slots", nil)
	if err != nil {
		return nil, err
	}
	return DecodeSlots(body)
}

func (b *Bridge) fetchMetrics(ctx context.Context) (Metrics, error) {
	body, err := call(ctx, b.Client, "GET", b.URL, "/metrics", nil)
	if err != nil {
		return Metrics{}, err
	}
	return ParseMetrics(bytes.NewReader(body))
}

var _ serve.Backend = (*Bridge)(nil)
