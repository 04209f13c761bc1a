package llamacpp

import (
	"time"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Tracker keeps the bridge's view of what llama.cpp's KV cache holds and
// turns each change into kvgate KV events (GPU tier, rank 0, hashed with
// kvstore.Hasher from token ids, as the vllm Translator hashes vLLM's
// blocks). llama.cpp publishes no events and /slots shows no token ids,
// so the view is built from what the bridge itself knows, holder by
// holder:
//
//   - a running request holds its prompt once its first token came (the
//     prompt is then in some slot's cache; which one the stream does not
//     say until its last event);
//   - a slot holds what the last request the bridge saw end on it left
//     there: prompt and generated ids, up to the tokens_cached of its last
//     event (id_slot names the slot);
//   - a request that ended without a last event (cancelled, failed, cut
//     at a stop token) is an orphan: its tokens are in some slot until a
//     poll of /slots shows which, or it expires.
//
// An engine block is cached when any holder holds it; a block is STORED
// when its first holder takes it and REMOVED when its last lets go.
// /slots polls correct the slots: a task the bridge did not attribute
// (another client's, or one of its own still running) keeps only the
// prefix it reused (n_prompt_tokens_cache) once it has started, an idle
// slot holds at most n_prompt_tokens, and a slot an unattributed task
// used keeps nothing once a grace period has passed (the last event of a
// request of the bridge's own may be on its way) unless an orphan fits it.
//
// A Tracker is not safe for concurrent use: Bridge calls it under its
// mutex, which also orders the events it returns with their sequence
// numbers.
type Tracker struct {
	h      *kvstore.Hasher
	grace  time.Duration
	slots  []slotHolder
	reqs   map[uint64]*reqHolder
	blocks map[uint64]*blockRef
	epoch  uint64
}

// content is what one holder holds: token ids from the start of a
// sequence, and the kvgate hashes of their full blocks.
type content struct {
	tokens []uint32
	hashes []uint64
}

// slotHolder is one llama.cpp slot.
type slotHolder struct {
	content
	// task is the id_task the content is attributed to (-1: a slot never
	// used; -2: none).
	task int
	// cached is how many tokens the server said the slot holds when the
	// content was set (the content may know fewer of them).
	cached int
	// awaitN, when not negative, says a request just settled here leaving
	// awaitN tokens: the next idle poll showing that many adopts its task.
	awaitN int
	// setEpoch is the epoch of the last Settle: polls begun before it
	// may not show it yet and leave the slot alone.
	setEpoch uint64
	// confirmed: an unattributed task was seen reusing the kept prefix.
	confirmed bool
	// idleSince is when an unattributed task was first seen done.
	idleSince time.Time
}

// reqHolder is a request of the bridge's own.
type reqHolder struct {
	content
	promptLen int
	ended     time.Time // zero while it runs
}

// blockRef is one cached block: its parent, and how many holders hold it.
type blockRef struct {
	parent    uint64
	hasParent bool
	refs      uint32
}

const (
	noTask       = -2
	orphanFactor = 4 // orphans expire after orphanFactor × grace
)

// NewTracker returns an empty view of a server with n slots, hashing with
// h. grace is how long an idle slot an unattributed task used waits for
// a last event before it is forgotten.
func NewTracker(h *kvstore.Hasher, n int, grace time.Duration) *Tracker {
	t := &Tracker{h: h, grace: grace, reqs: map[uint64]*reqHolder{}, blocks: map[uint64]*blockRef{}}
	t.grow(n)
	return t
}

func (t *Tracker) grow(n int) {
	for len(t.slots) < n {
		t.slots = append(t.slots, slotHolder{task: -1, awaitN: -1})
	}
}

// Epoch is a counter of settled requests; pass its value at the start of
// a /slots request to Observe.
func (t *Tracker) Epoch() uint64 { return t.epoch }

// Hold records that request id's prompt is in the cache (its first token
// came).
func (t *Tracker) Hold(id uint64, prompt []uint32) []wire.Event {
	r := &reqHolder{promptLen: len(prompt)}
	t.reqs[id] = r
	return t.set(&r.content, prompt, nil)
}

// Settle records that request id ended on slot, which now holds tokens
// (what the bridge knows of them) of the cached tokens the server
// reported.
func (t *Tracker) Settle(id uint64, slot int, tokens []uint32, cached int) []wire.Event {
	if slot < 0 || slot >= maxSlots {
		return t.End(id, time.Now())
	}
	t.grow(slot + 1)
	s := &t.slots[slot]
	out := t.set(&s.content, tokens, nil)
	t.epoch++
	s.cached, s.awaitN, s.setEpoch, s.confirmed, s.idleSince = cached, cached, t.epoch, false, time.Time{}
	if r := t.reqs[id]; r != nil {
		out = t.set(&r.content, nil, out)
		delete(t.reqs, id)
	}
	return out
}

// End records that request id ended without saying where: it becomes an
// orphan holding tokens, the ids the bridge knows it left in its slot.
func (t *Tracker) End(id uint64, now time.Time, tokens ...uint32) []wire.Event {
	r := t.reqs[id]
	if r == nil {
		return nil
	}
	r.ended = now
	if len(tokens) > len(r.tokens) {
		return t.set(&r.content, tokens, nil)
	}
	return nil
}

// Observe applies a /slots answer whose request began at epoch since.
func (t *Tracker) Observe(since uint64, slots []Slot, now time.Time) []wire.Event {
	var out []wire.Event
	t.grow(len(slots))
	for i := len(slots); i < len(t.slots); i++ { // slots the server no longer has
		out = t.set(&t.slots[i].content, nil, out)
	}
	for i := range slots {
		if sh := &t.slots[i]; sh.setEpoch <= since {
			out = t.observe(sh, &slots[i], now, out)
		}
	}
	for id, r := range t.reqs {
		if !r.ended.IsZero() && now.Sub(r.ended) > orphanFactor*t.grace {
			out = t.set(&r.content, nil, out)
			delete(t.reqs, id)
		}
	}
	return out
}

// observe applies one slot of a /slots answer.
func (t *Tracker) observe(sh *slotHolder, s *Slot, now time.Time, out []wire.Event) []wire.Event {
	n := s.NPromptTokens
	if sh.awaitN >= 0 {
		settled := !s.IsProcessing && n == sh.awaitN
		sh.awaitN = -1
		if settled {
			sh.task, sh.cached = s.TaskID(), n
			return out
		}
		sh.task = noTask
	}
	if s.TaskID() == sh.task {
		if !s.IsProcessing && n < len(sh.tokens) { // cleared or erased since
			out = t.set(&sh.content, sh.tokens[:n], out)
		}
		sh.cached = n
		return out
	}
	if s.IsProcessing { // a task the bridge cannot attribute yet
		sh.idleSince = time.Time{}
		if s.started() || n != sh.cached { // it began: the slot keeps the prefix it reused
			keep := min(len(sh.tokens), s.NPromptCache, n)
			sh.confirmed = s.started()
			out = t.set(&sh.content, sh.tokens[:keep], out)
		}
		return out
	}
	if sh.idleSince.IsZero() {
		sh.idleSince = now
	}
	if now.Sub(sh.idleSince) < t.grace {
		return out
	}
	var keep []uint32
	if sh.confirmed {
		keep = sh.tokens
	}
	id, r := t.orphanFor(n)
	if r != nil {
		keep = r.tokens[:min(len(r.tokens), n)]
	}
	out = t.set(&sh.content, keep, out)
	if r != nil {
		out = t.set(&r.content, nil, out)
		delete(t.reqs, id)
	}
	sh.task, sh.cached, sh.confirmed, sh.idleSince = s.TaskID(), n, false, time.Time{}
	return out
}

// orphanFor is the one orphan whose prompt fits in n cached tokens, if
// exactly one does.
func (t *Tracker) orphanFor(n int) (uint64, *reqHolder) {
	var id uint64
	var found *reqHolder
	for rid, r := range t.reqs {
		if !r.ended.IsZero() && r.promptLen <= n {
			if found != nil {
				return 0, nil
			}
			id, found = rid, r
		}
	}
	return id, found
}

// Clear forgets everything (the server restarted or stopped answering)
// and returns the event that tells routers to.
func (t *Tracker) Clear() []wire.Event {
	for i := range t.slots {
		t.slots[i] = slotHolder{task: -1, awaitN: -1}
	}
	clear(t.reqs)
	clear(t.blocks)
	return []wire.Event{{Kind: wire.EventCleared, Tier: wire.TierGPU}}
}

// Snapshot returns every cached block as a STORED event with its parent.
func (t *Tracker) Snapshot() []wire.Event {
	out := make([]wire.Event, 0, len(t.blocks))
	for h, b := range t.blocks {
		out = append(out, wire.Event{Kind: wire.EventStored, Tier: wire.TierGPU, HasParent: b.hasParent, Parent: b.parent,
			Hashes: wire.HashesOf([]uint64{h})})
	}
	return out
}

// Blocks counts the cached blocks.
func (t *Tracker) Blocks() int { return len(t.blocks) }

// set makes c hold tokens, appending the events of the blocks that
// change hands: blocks past the common prefix are taken (STORED when
// first held) and let go (REMOVED when last held).
func (t *Tracker) set(c *content, tokens []uint32, out []wire.Event) []wire.Event {
	lcp := 0
	for lcp < min(len(c.tokens), len(tokens)) && c.tokens[lcp] == tokens[lcp] {
		lcp++
	}
	keep := min(lcp/t.h.BlockSize(), len(c.hashes))
	old := c.hashes
	hashes, err := t.h.Extend(append([]uint64(nil), old[:keep]...), tokens, nil)
	if err != nil {
		hashes = hashes[:keep]
	}
	out = t.take(hashes, keep, out)
	out = t.letGo(old[keep:], out)
	c.tokens, c.hashes = append(c.tokens[:0:0], tokens...), hashes
	return out
}

// take adds a holder to hashes[from:], a chain under hashes[from-1],
// appending a STORED event for each run of blocks nobody held.
func (t *Tracker) take(hashes []uint64, from int, out []wire.Event) []wire.Event {
	run := -1
	flush := func(end int) {
		if run >= 0 {
			ev := wire.Event{Kind: wire.EventStored, Tier: wire.TierGPU, Hashes: wire.HashesOf(hashes[run:end])}
			if run > 0 {
				ev.HasParent, ev.Parent = true, hashes[run-1]
			}
			out, run = append(out, ev), -1
		}
	}
	for i := from; i < len(hashes); i++ {
		b := t.blocks[hashes[i]]
		if b == nil {
			b = &blockRef{}
			if i > 0 {
				b.parent, b.hasParent = hashes[i-1], true
			}
			t.blocks[hashes[i]] = b
		}
		if b.refs++; b.refs == 1 {
			if run < 0 {
				run = i
			}
		} else {
			flush(i)
		}
	}
	flush(len(hashes))
	return out
}

// letGo removes a holder from hashes, appending one REMOVED event for the
// blocks nobody holds any more.
func (t *Tracker) letGo(hashes []uint64, out []wire.Event) []wire.Event {
	var gone []uint64
	for _, h := range hashes {
		if b := t.blocks[h]; b != nil {
			if b.refs--; b.refs == 0 {
				delete(t.blocks, h)
				gone = append(gone, h)
			}
		}
	}
	if len(gone) > 0 {
		out = append(out, wire.Event{Kind: wire.EventRemoved, Tier: wire.TierGPU, Hashes: wire.HashesOf(gone)})
	}
	return out
}
