package kvstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Slot identifies one (engine, data-parallel rank) in the index.
type Slot uint16

// MaxSlots bounds the (engine, rank) pairs one index tracks.
const MaxSlots = 1<<16 - 1

const (
	shardBits = 8
	numShards = 1 << shardBits
)

// Sentinel errors.
var (
	ErrUnknownEngine = errors.New("kvstore: unknown engine")
	ErrEngineExists  = errors.New("kvstore: engine already registered")
	ErrUnknownSlot   = errors.New("kvstore: unknown slot")
	ErrTooManySlots  = errors.New("kvstore: too many engine ranks")
	ErrBadEvent      = errors.New("kvstore: invalid event")
)

// EngineConfig registers an engine.
type EngineConfig struct {
	ID string
	// Ranks is the number of data-parallel ranks (at least 1); each gets a Slot.
	Ranks int
	// Capacity is the engine's KV capacity in blocks per tier (per rank).
	Capacity [NumTiers]uint64
	// Groups are the KV cache groups of a hybrid model, in the order its
	// events number them (Event.Group). Empty is one full-attention cache
	// at the hash block size, as every model without groups has. Each
	// group of a rank holds its blocks apart (a slot of its own behind the
	// rank's), so one hash in two groups is two holdings.
	Groups []Group
}

// Options configure an Index.
type Options struct {
	// ApproxTTL is how long an approximate entry lives after its last use.
	ApproxTTL time.Duration
	// ApproxMaxBlocks bounds the approximate entries of one slot; least
	// recently used leave first. 0 uses the slot's GPU capacity, or
	// DefaultApproxMaxBlocks when that is unknown.
	ApproxMaxBlocks int
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// Defaults for Options.
const (
	DefaultApproxTTL       = 2 * time.Minute
	DefaultApproxMaxBlocks = 1 << 18
)

// DefaultOptions returns the options New uses for zero fields.
func DefaultOptions() Options {
	return Options{ApproxTTL: DefaultApproxTTL, Now: time.Now}
}

type slotState struct {
	engine string
	rank   int
	inUse  bool
	// Hybrid engines (group.go): a rank's slot lists its groups' slots
	// (members[0] is itself); a group's slot names its rank's (owner) and
	// is no candidate, nor a target of Apply, of its own. Match reads
	// inUse, owner, members and gen of every candidate: they come first.
	owner    Slot
	gen      [numTiers]uint8
	members  []Slot
	precise  bool            // has received KV events: approximate entries are off (mirrored in Index.precise)
	passGen  [numTiers]uint8 // gen when the current sweep pass started
	safeGen  [numTiers]uint8 // gen at the start of the last complete sweep pass
	capacity [NumTiers]uint64
	blocks   [numTiers]uint64
	entries  uint64 // table entries of this slot, stale ones included until swept
	digest   [numTiers]Digest
	approx   approxLRU
	groups   []Group // the groups of members, in order (a rank's slot)
	groupIdx int
	group    Group
}

// Index is the global KV block index. See the package doc for its
// concurrency guarantee. The zero value is not usable; call New.
type Index struct {
	mu       sync.RWMutex
	opts     Options
	shards   [numShards]table
	slots    []slotState
	free     []Slot
	engines  map[string][]Slot
	sweep    sweepCursor
	stats    counters
	sink     uint64 // prefetchRuns results, never read
	matchers sync.Pool
	// precise mirrors slotState.precise, one bit per slot, so that
	// RecordApprox returns without the lock for a slot that has had KV
	// events (the common case on a router's shared index). Written under
	// mu, read with or without it.
	precise [(MaxSlots + 63) / 64]atomic.Uint64
}

type counters struct {
	eventsApplied uint64
	blocksApplied uint64
	applies       uint64 // Apply calls, for the invariant checks' cadence
}

// New returns an empty index.
func New(opts Options) *Index {
	d := DefaultOptions()
	if opts.ApproxTTL <= 0 {
		opts.ApproxTTL = d.ApproxTTL
	}
	if opts.Now == nil {
		opts.Now = d.Now
	}
	ix := &Index{opts: opts, engines: make(map[string][]Slot)}
	for i := range ix.shards {
		ix.shards[i].keep = ix.keepOnGrow
	}
	ix.matchers.New = func() any { return new(matcher) }
	return ix
}

// AddEngine registers an engine and returns one slot per rank.
func (ix *Index) AddEngine(cfg EngineConfig) ([]Slot, error) {
	if cfg.Ranks < 1 {
		cfg.Ranks = 1
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.engines[cfg.ID]; ok {
		return nil, fmt.Errorf("adding %q: %w", cfg.ID, ErrEngineExists)
	}
	for _, g := range cfg.Groups {
		if err := g.validate(); err != nil {
			return nil, fmt.Errorf("adding %q: %w", cfg.ID, err)
		}
	}
	if len(ix.slots)-len(ix.free)+cfg.Ranks*slotsPerRank(&cfg) > MaxSlots {
		return nil, fmt.Errorf("adding %q with %d ranks: %w", cfg.ID, cfg.Ranks, ErrTooManySlots)
	}
	slots := make([]Slot, cfg.Ranks)
	for r := range slots {
		s := ix.takeSlot()
		st := &ix.slots[s]
		// A reused slot keeps its generations (already bumped when it was
		// freed), so entries of its previous engine stay invalid.
		*st = slotState{engine: cfg.ID, rank: r, inUse: true, capacity: cfg.Capacity, owner: s,
			gen: st.gen, passGen: st.passGen, safeGen: st.safeGen, entries: st.entries}
		ix.setPrecise(s, false)
		if hybrid(cfg.Groups) {
			ix.groupSlots(s, cfg.Groups)
		}
		slots[r] = s
	}
	ix.engines[cfg.ID] = slots
	return slots, nil
}

// RemoveEngine forgets an engine ("engine gone"): its blocks leave every
// tier at once and its slots are freed for reuse.
func (ix *Index) RemoveEngine(id string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	slots, ok := ix.engines[id]
	if !ok {
		return fmt.Errorf("removing %q: %w", id, ErrUnknownEngine)
	}
	for _, s := range slots {
		for _, m := range ix.membersOf(s) {
			for t := range Tier(numTiers) {
				ix.clearTier(m, t)
			}
			st := &ix.slots[m]
			st.inUse, st.engine, st.members, st.groups = false, "", nil, nil
			st.approx = approxLRU{}
			ix.free = append(ix.free, m)
		}
		ix.setPrecise(s, false)
	}
	delete(ix.engines, id)
	return nil
}

// Slots returns the slots of an engine's ranks.
func (ix *Index) Slots(id string) ([]Slot, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s, ok := ix.engines[id]
	return append([]Slot(nil), s...), ok
}

// Apply applies one batch of events of one slot atomically.
func (ix *Index) Apply(slot Slot, events []Event) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.applyLocked(slot, events)
}

// Replace makes the slot's contents exactly the STORED events given (a
// snapshot, or none when the engine is lost), atomically. Approximate
// entries go too: they guessed at a cache the snapshot now describes, or
// that is gone. A non-empty snapshot makes the slot precise, as events do;
// an empty one leaves it as if it had never had events, since it says
// nothing of whether the engine publishes them (an engine without KV
// events answers a snapshot request with nothing), so routing may record
// approximate entries for it again until its first event.
func (ix *Index) Replace(slot Slot, stored []Event) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.checkSlot(slot); err != nil {
		return err
	}
	for _, m := range ix.membersOf(slot) {
		for t := range Tier(numTiers) {
			ix.clearTier(m, t)
		}
	}
	st := &ix.slots[slot]
	st.approx, st.precise = approxLRU{}, false
	ix.setPrecise(slot, false)
	return ix.applyLocked(slot, stored)
}

func (ix *Index) checkSlot(slot Slot) error {
	if int(slot) >= len(ix.slots) || !ix.slots[slot].inUse || ix.slots[slot].owner != slot {
		return fmt.Errorf("slot %d: %w", slot, ErrUnknownSlot)
	}
	return nil
}

func (ix *Index) applyLocked(slot Slot, events []Event) error {
	if err := ix.checkSlot(slot); err != nil {
		return err
	}
	for i := range events {
		ev := &events[i]
		if ev.Tier >= NumTiers || ev.Kind < Stored || ev.Kind > Cleared {
			return fmt.Errorf("event %d (kind %d, tier %d): %w", i, ev.Kind, ev.Tier, ErrBadEvent)
		}
		if _, ok := ix.groupSlot(slot, ev.Group); !ok {
			return fmt.Errorf("event %d: group %d of %d: %w", i, ev.Group, len(ix.membersOf(slot)), ErrBadEvent)
		}
	}
	st := &ix.slots[slot]
	if !st.precise && len(events) > 0 {
		// Precise events replace what the router guessed, at once.
		st.precise = true
		ix.setPrecise(slot, true)
		if st.blocks[TierApprox] > 0 {
			ix.clearTier(slot, TierApprox)
		}
		st.approx = approxLRU{}
	}
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case Stored, Removed:
			// Ask for the entries a group will touch one group ahead, so
			// the cache misses of the next group overlap with the work on
			// this one.
			hs := ev.Hashes
			target, _ := ix.groupSlot(slot, ev.Group)
			ix.sink += ix.prefetchRuns(hs, true)
			for g := 0; g < len(hs); g += prefetchGroup {
				group := hs[g:min(g+prefetchGroup, len(hs))]
				ix.sink += ix.prefetchRuns(hs[min(g+prefetchGroup, len(hs)):], true)
				for _, h := range group {
					if ev.Kind == Stored {
						ix.store(target, ev.Tier, h)
					} else {
						ix.removeBlock(target, ev.Tier, h)
					}
				}
			}
		case Cleared: // the tier of every group (PROTOCOL.md 6.3)
			if ms := ix.slots[slot].members; ms != nil {
				for _, m := range ms {
					ix.clearTier(m, ev.Tier)
				}
			} else {
				ix.clearTier(slot, ev.Tier)
			}
		}
		ix.stats.blocksApplied += uint64(len(ev.Hashes))
	}
	ix.stats.eventsApplied += uint64(len(events))
	ix.stats.applies++
	// A full check walks every shard: after each of the first 1,024
	// applies (every unit test's index), then after every 64th, so that
	// a long simulation under -tags invariants stays linear in practice.
	if invariants && (ix.stats.applies <= 1024 || ix.stats.applies%64 == 0) {
		for i := range ix.shards {
			ix.shards[i].check()
		}
	}
	return nil
}

// setPrecise records, under mu, whether slot has had KV events.
func (ix *Index) setPrecise(slot Slot, on bool) {
	w, bit := &ix.precise[slot/64], uint64(1)<<(slot%64)
	if on {
		w.Or(bit)
	} else {
		w.And(^bit)
	}
}

// Precise reports whether slot has had KV events (Apply, or a non-empty
// Replace) since it was registered or last emptied by Replace: routing
// then trusts its events and records no approximate entries for it. It
// takes no lock.
func (ix *Index) Precise(slot Slot) bool {
	return int(slot) < MaxSlots && ix.precise[slot/64].Load()&(1<<(slot%64)) != 0
}

// keepOnGrow says whether a growing shard copies e: stale entries are dropped
// there instead of waiting for the sweeper.
func (ix *Index) keepOnGrow(e *entry) bool {
	if ix.validTiers(e) != 0 {
		return true
	}
	ix.slots[e.slot].entries--
	return false
}

func (ix *Index) validTiers(e *entry) uint8 {
	st := &ix.slots[e.slot]
	var v uint8
	for t := range numTiers {
		if e.tiers&(1<<t) != 0 && e.gen[t] == st.gen[t] {
			v |= 1 << t
		}
	}
	return v
}

func (ix *Index) store(slot Slot, t Tier, h uint64) {
	sh := &ix.shards[h>>(64-shardBits)]
	st := &ix.slots[slot]
	if sh.full() {
		sh.grow()
	}
	i, found := sh.lookup(h, uint16(slot))
	if !found {
		sh.insertAt(i, entry{hash: h, slot: uint16(slot), tiers: 1 << t, gen: st.gen})
		st.entries++
	} else {
		e := &sh.entries[i]
		valid := ix.validTiers(e)
		if valid&(1<<t) != 0 {
			return // already held: a duplicate event
		}
		e.tiers = valid | 1<<t
		e.gen = st.gen
	}
	st.blocks[t]++
	st.digest[t].add(h)
}

// removeBlock removes h from tier t of slot; it returns whether it was there.
func (ix *Index) removeBlock(slot Slot, t Tier, h uint64) bool {
	sh := &ix.shards[h>>(64-shardBits)]
	i := sh.find(h, uint16(slot))
	if i < 0 {
		return false
	}
	st := &ix.slots[slot]
	e := &sh.entries[i]
	valid := ix.validTiers(e)
	if valid&(1<<t) == 0 {
		return false
	}
	st.blocks[t]--
	st.digest[t].remove(h)
	e.gen = st.gen
	if e.tiers = valid &^ (1 << t); e.tiers == 0 {
		sh.remove(i)
		st.entries--
	}
	return true
}

// clearTier drops every block of one tier of a slot in O(1) by bumping its
// generation; entries of the old generation stay until swept.
func (ix *Index) clearTier(slot Slot, t Tier) {
	st := &ix.slots[slot]
	if st.gen[t]+1 == st.safeGen[t] {
		// 255 clears since the last complete sweep: the next generation
		// number may still be on stale entries. Sweep everything first.
		ix.sweepAllLocked()
	}
	st.gen[t]++
	st.blocks[t] = 0
	st.digest[t] = Digest{}
}
