// Package engine keeps kvgate's connections to inference engines: one
// multiplexed wire-protocol connection per engine (over netpoll), the
// handshake and hash-scheme check, snapshots and KV events into the shared
// index, LOAD reports, PING health, reconnection with backoff, GOAWAY, and
// the request streams. Its goroutines, locks and atomics: dataplane/LOCKS.md.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// State of an engine connection.
type State int32

// States.
const (
	StateConnecting State = iota
	StateReady
	StateDraining // GOAWAY received: no new requests
	StateDown
	// StateUnresponsive: connected, but a PING went unanswered for
	// PingTimeout; ready again at the engine's next frame.
	StateUnresponsive
	// StateDrained: drained or removed (Pool.Drain, Pool.Remove): its
	// streams are over, it is disconnected and its blocks left the index.
	StateDrained
)

func (s State) String() string {
	names := [...]string{"connecting", "ready", "draining", "down", "unresponsive", "drained"}
	if int(s) < 0 || int(s) >= len(names) {
		return fmt.Sprintf("state(%d)", int32(s))
	}
	return names[s]
}

// Engine is one engine as the router sees it, safe for concurrent use.
type Engine struct {
	Addr string
	pool *Pool
	log  *slog.Logger
	pos  int // place in the pool, unique among its members (Pos)

	// Membership (membership.go): stop ends run, done closes when it has
	// returned; leaving refuses new requests from the moment the engine is
	// drained or removed. retiring, retired and forget are guarded by the
	// pool's membership lock.
	stop                      context.CancelFunc
	done                      chan struct{}
	leaving                   atomic.Bool
	retiring, retired, forget bool

	state atomic.Int32
	// prof is what the last handshake said, replaced whole on each one, so
	// routing reads it for every candidate without a lock.
	prof atomic.Pointer[profile]
	mu   sync.Mutex // guards conn, nextStream and changes to streams
	conn *wire.Conn
	// streams is the stream table (streams.go): the read loop reads it
	// without mu.
	streams    atomic.Pointer[streamTable]
	nextStream uint32

	load      rankLoads    // per rank (ranks.go)
	adapters  rankAdapters // per rank, from ADAPTERS (adapters.go)
	lastSeq   []uint64     // per rank; guarded by the read loop
	snapshots map[uint16][]kvstore.Event
	// events is the read loop's room for an EVENTS frame's events and
	// their hashes, converted for the index (applyEvents), which keeps
	// neither: one frame's conversion allocates nothing once it has grown.
	events kvScratch
	// snapAwait counts the ranks whose first snapshot the session awaits
	// before the engine takes requests; the session goroutine's (it runs
	// the read loop).
	snapAwait int
}

// Info returns the engine's handshake (zero until first connected).
func (e *Engine) Info() wire.Handshake { return e.profile().info }

// MaxModelLen returns the context length the engine's handshake
// announces (0: none), without copying the handshake as Info does.
func (e *Engine) MaxModelLen() int { return int(e.profile().info.MaxModelLen) }

// Features returns the features of the engine's handshake.
func (e *Engine) Features() wire.Feature { return e.profile().info.Features }

// Shape returns what scoring needs of the engine's handshake without
// copying it: tokens per step and GPU KV capacity in tokens.
func (e *Engine) Shape() (maxBatched int, capacityTokens float64) {
	p := e.profile()
	return int(p.info.MaxBatchedTokens), float64(p.info.Capacity(wire.TierGPU)) * float64(p.info.BlockSize)
}

// profile is one handshake's view of the engine. It is never modified once
// published.
type profile struct {
	info wire.Handshake
	// models are info.Models as a GENERATE spells them (ResolveWire).
	models [][]byte
	// hasher matches the engine's block size, seed and model.
	hasher *kvstore.Hasher
	slots  []kvstore.Slot // kvstore slot per data-parallel rank
	// groups are the engine's KV cache groups as the index keeps them
	// (nil: one cache, or a group-blind pool); events name them.
	groups []kvstore.Group
}

// noProfile stands for an engine that has not completed a handshake.
var noProfile = &profile{}

// newProfile is the profile of handshake info, its models spelled once.
func newProfile(info wire.Handshake, hasher *kvstore.Hasher, slots []kvstore.Slot, groups []kvstore.Group) *profile {
	p := &profile{info: info, hasher: hasher, slots: slots, groups: groups, models: make([][]byte, len(info.Models))}
	for i, m := range info.Models {
		p.models[i] = []byte(m)
	}
	return p
}

func (e *Engine) profile() *profile {
	if p := e.prof.Load(); p != nil {
		return p
	}
	return noProfile
}

// State returns the connection state. A ready engine that is being
// drained or removed is draining.
func (e *Engine) State() State {
	s := State(e.state.Load())
	if s == StateReady && e.leaving.Load() {
		return StateDraining
	}
	return s
}

// Pos is the engine's place in the pool: unique among the pool's members
// while it is one, and given to a later engine once it has left. The ring's
// load vectors (syncring) are indexed by it.
func (e *Engine) Pos() int { return e.pos }

// Ready reports whether the engine takes new requests.
func (e *Engine) Ready() bool { return e.State() == StateReady }

// Hybrid reports whether the engine's KV cache groups are indexed apart
// (a hybrid model, and a pool that is not group-blind).
func (e *Engine) Hybrid() bool { return e.profile().groups != nil }

// Hasher returns the engine's block hasher, nil before the first handshake.
func (e *Engine) Hasher() *kvstore.Hasher { return e.profile().hasher }

// Slot returns the index slot of rank 0 (and whether the engine has one);
// RankSlot any rank's.
func (e *Engine) Slot() (kvstore.Slot, bool) { return e.rankSlot(0) }

// loadReport is a LOAD as received, numbered, with when it came.
type loadReport struct {
	m   wire.Load
	seq uint64
	at  time.Time
}

// Load returns the last LOAD rank 0 reported, or nil.
func (e *Engine) Load() *wire.Load {
	l, _, _ := e.LoadReport()
	return l
}

// LoadReport returns the last LOAD rank 0 reported (nil before the
// first), its number (1 for the first report, one more for each next) and
// when it arrived: RankLoadReport(0). Routers tell by these which of their
// reservations a report counts.
func (e *Engine) LoadReport() (l *wire.Load, seq uint64, at time.Time) {
	return e.RankLoadReport(0)
}

// OpenStreams returns the number of requests in flight on the engine.
func (e *Engine) OpenStreams() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.table().open
}

// Serves reports whether the engine serves model: one of its models, or
// one of its LoRA adapters by name (as vLLM exposes adapters).
func (e *Engine) Serves(model string) bool {
	_, _, ok := e.Resolve(model)
	return ok
}

// Resolve maps a requested model name to the engine's base model and the
// LoRA id to send (0 for a base model).
func (e *Engine) Resolve(model string) (base string, lora uint32, ok bool) {
	info := &e.profile().info
	i, lora, ok := resolve(info, model)
	if !ok {
		return "", 0, false
	}
	return info.Models[i], lora, true
}

// ResolveWire is Resolve with the base model's name as a GENERATE's Model
// field takes it, without a copy a request: the slice is the engine's
// own and must not be written.
func (e *Engine) ResolveWire(model string) (base []byte, lora uint32, ok bool) {
	p := e.profile()
	i, lora, ok := resolve(&p.info, model)
	if !ok || i >= len(p.models) {
		return nil, 0, false
	}
	return p.models[i], lora, true
}

// resolve is Resolve's lookup: the index of the base model in info.Models.
func resolve(info *wire.Handshake, model string) (i int, lora uint32, ok bool) {
	for i, m := range info.Models {
		if m == model {
			return i, 0, true
		}
	}
	for _, l := range info.LoRAs {
		if l.Name == model && len(info.Models) > 0 {
			return 0, l.ID, true
		}
	}
	return 0, 0, false
}

// purge forgets what a lost engine held ("engine gone"): its cache may be
// gone too, and a reconnect brings a snapshot.
func (e *Engine) purge() {
	for _, s := range e.profile().slots {
		if err := e.pool.index.Replace(s, nil); err != nil {
			e.log.Warn("purging a lost engine's blocks", "engine", e.Addr, "err", err)
		}
	}
}

func (e *Engine) rankSlot(rank uint16) (kvstore.Slot, bool) {
	slots := e.profile().slots
	if int(rank) >= len(slots) {
		return 0, false
	}
	return slots[rank], true
}

// helloFeatures are the features of the pool's HELLO (FeatureTokenBatch:
// streams take several steps' tokens a frame, stream.go; FeatureDisagg: a
// stream's first event may carry a hand-off's KVTransfer): FeatureHybridGroups
// unless the pool is group-blind.
func (p *Pool) helloFeatures() wire.Feature {
	f := wire.FeatureS2 | wire.FeatureZstd | wire.FeatureAdapters | wire.FeatureTokenBatch | wire.FeatureDisagg
	if !p.cfg.GroupBlind {
		f |= wire.FeatureHybridGroups
	}
	return f
}

// indexGroups converts the KV cache groups of an engine's WELCOME into the
// index's (nil for an engine without groups, or a group-blind pool).
func (p *Pool) indexGroups(h *wire.Handshake) ([]kvstore.Group, error) {
	if p.cfg.GroupBlind || h.Features&wire.FeatureHybridGroups == 0 || len(h.Groups) == 0 {
		return nil, nil
	}
	out := make([]kvstore.Group, len(h.Groups))
	for i, g := range h.Groups {
		kg, err := kvstore.GroupOf(kvstore.GroupKind(g.Kind), int(g.BlockSize), int(g.Window), int(h.BlockSize))
		if err != nil {
			return nil, fmt.Errorf("engine group %d: %w", i, err)
		}
		out[i] = kg
	}
	return out, nil
}
