package vllm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// Adapter is a LoRA adapter the bridge serves: its name (vLLM's lora_name,
// the model a request names), the id routers know it by, and where vLLM
// loads it from (vLLM's lora_path; "" for an adapter the engine was started
// with, --lora-modules, which the bridge never unloads since it could not
// load it again).
type Adapter struct {
	Name   string
	WireID uint32
	Source string
}

// ErrSlotsPinned is Acquire's answer when every slot holds an adapter the
// bridge may not unload (one the engine was started with, or one it was not
// told of) and none will come free.
var ErrSlotsPinned = errors.New("vllm: every adapter slot holds an adapter the bridge cannot unload (started with the engine, or unknown to the bridge): raise --max-loras to vLLM's, or unload one")

// DefaultAdapterLoadTimeout bounds one load or unload call: a load that
// takes longer fails the requests that wait for it.
const DefaultAdapterLoadTimeout = 2 * time.Minute

// Residency keeps the adapters registered on a vLLM engine within its
// slots (vLLM's --max-loras): a request for an adapter that is not
// resident loads it through /v1/load_lora_adapter, first unloading the
// least recently used adapter that no request is using when every slot is
// taken, and waits when every resident adapter is in use. Every change is
// announced to the routers (ADAPTERS, PROTOCOL.md 6.9), a load with the
// time the engine took. vLLM loads and unloads an adapter on all its
// data-parallel ranks at once (its DP clients send add_lora and
// remove_lora, utility calls, to every engine core:
// vllm/v1/engine/core_client.py at
// 364631ab07d283c4f08db0544a2653c5b415a427), so every rank reports the
// same residency.
//
// Slots are counted in registered adapters: vLLM's worker keeps up to
// max_cpu_loras registered adapters in host memory (--max-cpu-loras,
// --max-loras by default) and drops the least recently used beyond it, to
// read it again from disk unannounced on its next request; keeping the
// registered ones within --max-loras keeps every load one the bridge
// timed and announced.
//
// mu guards the maps and counters; no HTTP call is made under it. amu,
// taken before mu, makes each change and its announcement one step, so
// routers hear changes in the order they happened (a LOADED never after
// the EVICTED of the same adapter).
type Residency struct {
	URL    string
	Client *http.Client
	Model  string // the base model whose adapters /v1/models lists
	Slots  int
	Ranks  int
	// Announce sends an ADAPTERS frame to the routers that read them.
	Announce func(*wire.Adapters)
	Log      *slog.Logger
	// Timeout bounds one load or unload call (0: DefaultAdapterLoadTimeout).
	Timeout time.Duration

	amu      sync.Mutex
	mu       sync.Mutex
	byID     map[uint32]Adapter
	byName   map[string]uint32
	resident map[uint32]*residentAdapter
	loading  map[uint32]*adapterLoad
	foreign  int    // registered adapters the bridge was not told of: they hold slots
	changes  uint64 // loads and unloads so far, so Sync does not undo one it raced
	synced   bool
	tick     uint64
	freed    chan struct{} // closed (and replaced) when a slot may have come free
	waiting  int           // Acquire calls waiting for a slot
	stats    ResidencyStats
}

type residentAdapter struct {
	users   int
	lastUse uint64
}

// adapterLoad is a load under way: of adapter id, whose waiters wait on
// done; its victim's waiters wait on it too, and try again after it.
type adapterLoad struct {
	id   uint32
	done chan struct{}
	err  error
}

// ResidencyStats counts what a Residency did, for metrics.
type ResidencyStats struct {
	Loads, Evictions, Failures uint64
	LoadTime                   time.Duration // all loads together
	// Resident is the adapters resident now, InUse the requests holding
	// one, Waiting the requests waiting for a slot (every resident adapter
	// in use).
	Resident, InUse, Waiting int
}

// NewResidency returns the residency of adapters on the engine at url
// serving model, with slots adapters at once on each of ranks ranks.
func NewResidency(url string, c *http.Client, model string, slots, ranks int, adapters []Adapter, log *slog.Logger) *Residency {
	r := &Residency{URL: url, Client: c, Model: model, Slots: max(slots, 1), Ranks: max(ranks, 1), Log: log,
		byID: map[uint32]Adapter{}, byName: map[string]uint32{}, resident: map[uint32]*residentAdapter{},
		loading: map[uint32]*adapterLoad{}, freed: make(chan struct{}), Announce: func(*wire.Adapters) {}}
	for _, a := range adapters {
		r.byID[a.WireID], r.byName[a.Name] = a, a.WireID
	}
	return r
}

// Acquire holds adapter id for one request until Release: at once when it
// is resident, after its load otherwise. It fails when the load fails (with
// vLLM's message) or ctx ends; it waits while every slot holds an adapter
// in use. An adapter without a source that is not resident is passed
// through untracked: the engine was started with it, or answers that it
// has none.
func (r *Residency) Acquire(ctx context.Context, id uint32) error {
	for {
		r.mu.Lock()
		if s := r.resident[id]; s != nil {
			r.tick++
			s.users, s.lastUse = s.users+1, r.tick
			r.mu.Unlock()
			return nil
		}
		op := r.loading[id]
		var wait <-chan struct{}
		if op == nil {
			a, ok := r.byID[id]
			switch {
			case !ok:
				r.mu.Unlock()
				return fmt.Errorf("vllm: LoRA adapter %d is not served here", id)
			case a.Source == "":
				// One the engine was started with: not the bridge's to
				// load; the engine serves it, or says it has none.
				r.mu.Unlock()
				return nil
			}
			victim, full := r.victim()
			switch {
			case full && victim == 0 && !r.freeable():
				r.mu.Unlock()
				return fmt.Errorf("LoRA adapter %q: %w", a.Name, ErrSlotsPinned)
			case full && victim == 0:
				wait = r.freed // every slot in use: wait for a release
				r.waiting++
			default:
				op = &adapterLoad{id: id, done: make(chan struct{})}
				r.loading[id] = op
				if victim != 0 {
					// Until it is unloaded, a request for the victim
					// waits rather than loading it again.
					delete(r.resident, victim)
					r.loading[victim] = op
				}
				r.changes++
				go r.load(op, a, victim)
			}
		}
		r.mu.Unlock()
		if op != nil {
			wait = op.done
		}
		select {
		case <-ctx.Done():
		case <-wait:
		}
		if op == nil {
			r.mu.Lock()
			r.waiting--
			r.mu.Unlock()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if op != nil && op.id == id && op.err != nil {
			return op.err
		}
	}
}

// Release ends one request's hold on adapter id.
func (r *Residency) Release(id uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.resident[id]; s != nil && s.users > 0 {
		s.users-- // lastUse stays the request's start: adapters age by when they were asked for
		if s.users == 0 {
			r.signal()
		}
	}
}

// victim picks the adapter to unload for a new one: 0 with full false when
// a slot is free; the least recently used resident adapter no request
// uses (and the bridge can load again) when full; 0 with full true when
// there is none. r.mu is held.
func (r *Residency) victim() (id uint32, full bool) {
	if len(r.resident)+len(r.loading)+r.foreign < r.Slots {
		return 0, false
	}
	var best *residentAdapter
	for vid, s := range r.resident {
		if s.users == 0 && r.byID[vid].Source != "" && (best == nil || s.lastUse < best.lastUse) {
			best, id = s, vid
		}
	}
	return id, true
}

// freeable reports whether a slot can come free: an adapter the bridge
// may unload is in use (it is released some time) or a load or unload is
// under way (it ends some time); r.mu is held.
func (r *Residency) freeable() bool {
	if len(r.loading) > 0 {
		return true
	}
	for id, s := range r.resident {
		if s.users > 0 && r.byID[id].Source != "" {
			return true
		}
	}
	return false
}

// signal wakes the requests waiting for a slot; r.mu is held.
func (r *Residency) signal() {
	close(r.freed)
	r.freed = make(chan struct{})
}

// load unloads victim (0: none) and loads a, then settles op.
func (r *Residency) load(op *adapterLoad, a Adapter, victim uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), cmpOr(r.Timeout, DefaultAdapterLoadTimeout))
	defer cancel()
	if victim != 0 {
		if err := r.unload(ctx, victim); err != nil {
			r.settle(op, a, 0, err)
			return
		}
	}
	start := time.Now()
	err := LoadAdapter(ctx, r.Client, r.URL, a.Name, a.Source)
	took := time.Since(start)
	if alreadyLoaded(err) {
		// Registered before the bridge knew (another client, or before
		// the first Sync): resident, but no load was timed.
		r.Log.Info("LoRA adapter was already registered on the engine", "adapter", a.Name)
		r.settle(op, a, 0, nil)
		r.amu.Lock()
		r.announceResident()
		r.amu.Unlock()
		return
	}
	r.settle(op, a, took, err)
}

// unload removes victim from the engine and says so; an adapter the
// engine no longer has is gone all the same.
func (r *Residency) unload(ctx context.Context, victim uint32) error {
	v := r.byID[victim] // byID is never written after NewResidency
	err := UnloadAdapter(ctx, r.Client, r.URL, v.Name)
	var ae *LoRAAPIError
	failed := err != nil && !(errors.As(err, &ae) && ae.NotFound())
	r.amu.Lock()
	defer r.amu.Unlock()
	r.mu.Lock()
	delete(r.loading, victim)
	if failed {
		r.tick++
		r.resident[victim] = &residentAdapter{lastUse: r.tick} // still there, as far as anyone knows
	} else {
		r.stats.Evictions++
	}
	r.mu.Unlock()
	if failed {
		return fmt.Errorf("freeing a slot: %w", err)
	}
	r.Log.Info("LoRA adapter evicted for another", "adapter", v.Name)
	r.announce(wire.AdaptersEvicted, 0, v)
	return nil
}

// settle ends a load: resident when err is nil, the slot free again
// otherwise; every waiter wakes.
func (r *Residency) settle(op *adapterLoad, a Adapter, took time.Duration, err error) {
	r.amu.Lock()
	defer r.amu.Unlock()
	r.mu.Lock()
	delete(r.loading, a.WireID)
	r.changes++
	op.err = err
	if err == nil {
		r.tick++
		r.resident[a.WireID] = &residentAdapter{lastUse: r.tick}
		if took > 0 {
			r.stats.Loads++
			r.stats.LoadTime += took
		}
	} else {
		r.stats.Failures++
	}
	close(op.done)
	r.signal()
	r.mu.Unlock()
	switch {
	case err != nil:
		r.Log.Warn("LoRA adapter load failed", "adapter", a.Name, "source", a.Source, "err", err)
	case took > 0:
		r.Log.Info("LoRA adapter loaded", "adapter", a.Name, "source", a.Source, "took", took)
		r.announce(wire.AdaptersLoaded, uint64(took), a)
	}
}

// alreadyLoaded reports whether vLLM refused a load because the name is
// registered already (serving.py's _check_load_lora_adapter_request).
func alreadyLoaded(err error) bool {
	var ae *LoRAAPIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.Contains(ae.Message, "has already been loaded")
}

// announce sends one change of a to the routers, once per rank.
func (r *Residency) announce(change wire.AdapterChange, loadNs uint64, a Adapter) {
	for rank := range r.Ranks {
		r.Announce(&wire.Adapters{DPRank: uint16(rank), Change: change, Slots: uint16(min(r.Slots, 0xffff)), LoadNanos: loadNs,
			LoRAs: []wire.LoRA{{ID: a.WireID, Name: a.Name}}})
	}
}

// announceResident sends every rank's full residency to the routers;
// r.amu is held.
func (r *Residency) announceResident() {
	for _, m := range r.ResidentFrames() {
		r.Announce(m.(*wire.Adapters))
	}
}

// ResidentFrames are each rank's ADAPTERS RESIDENT frame, sent to a router
// before its snapshot.
func (r *Residency) ResidentFrames() []wire.Message {
	r.mu.Lock()
	ids := make([]uint32, 0, len(r.resident))
	for id := range r.resident {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	slices.Sort(ids)
	loras := make([]wire.LoRA, len(ids))
	for i, id := range ids {
		loras[i] = wire.LoRA{ID: id, Name: r.byID[id].Name}
	}
	out := make([]wire.Message, r.Ranks)
	for rank := range out {
		out[rank] = &wire.Adapters{DPRank: uint16(rank), Change: wire.AdaptersResident, Slots: uint16(min(r.Slots, 0xffff)), LoRAs: loras}
	}
	return out
}

// Stats returns what the residency did so far.
func (r *Residency) Stats() ResidencyStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Resident, s.Waiting = len(r.resident), r.waiting
	for _, a := range r.resident {
		s.InUse += a.users
	}
	return s
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
