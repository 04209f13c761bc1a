package vllm

import (
	"sync"

	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/wire"
)

// Translator turns an engine's KV events into kvgate wire events. Engine
// block hashes depend on the engine's own hashing, so it recomputes
// kvgate's chained hashes from the token ids of every stored block and
// keeps, per data-parallel rank, the engine hash -> kvgate hash table that
// translates removals. The table is also the bridge's answer to a router's
// SNAPSHOT_REQUEST.
//
// What it cannot translate it skips and counts, and applies the rest of
// the batch: a stored block whose parent it never saw (the bridge started
// after the engine, or events were lost), blocks vLLM hashed with extra
// keys other than the adapter's and kvgate's images (cache salt, prompt
// embeddings, images kvgate did not name: multimodal_events.go), KV cache
// groups it was not told to index (groups.go), tiers it does not know,
// offloaded copies of blocks it never saw on the GPU, and events that did
// not decode. A LoRA block (its adapter in extra_keys, lora_name or
// lora_id) is hashed with kvgate's key for that adapter. Offloaded copies
// (offload.go) are the same blocks in a lower tier.
type Translator struct {
	h     *kvstore.Hasher
	loras map[string]uint32 // adapter name -> wire LoRA id
	byID  map[int]uint32    // vLLM's integer lora_id -> wire LoRA id

	mu sync.Mutex
	// ranks holds each rank's blocks of kvgate group 0; other groups'
	// blocks are in groupTables (groups.go), one table per (rank, group),
	// since vLLM mixes no group into its block hashes.
	ranks       map[int]map[Hash]*block
	groupTables map[rankGroup]map[Hash]*block
	groups      groupMap
	skipped     Skipped
	// gpuBlockSize is the block size of the last GPU store, to tell how
	// many GPU blocks an offloaded block spans.
	gpuBlockSize int

	// OffloadBlockSize is the offloaded block size in tokens (vLLM's
	// kv_connector_extra_config block_size) for offloading events whose
	// block_size is 0; 0 takes such a copy as one GPU block. Set it before
	// the first Apply.
	OffloadBlockSize int
}

// Skipped counts what could not be translated, by reason: blocks, or
// events for Undecodable.
type Skipped struct {
	UnknownParent, ExtraKeys, OtherGroup, UnknownTier, UnknownLoRA, UnknownBlock uint64
	// GroupKind counts blocks of a group whose event named another kind
	// than the group was announced with, or one kvgate cannot index.
	GroupKind uint64
	// Multimodal, CacheSalt and PromptEmbeds are blocks hashed with those
	// extra keys (ExtraKeys counts keys of no kind vLLM documents);
	// Multimodal only those whose images are not kvgate's ids.
	Multimodal, CacheSalt, PromptEmbeds uint64
	// UnknownOffload counts offloaded copies of blocks never seen on the GPU.
	UnknownOffload uint64
	// Remote counts blocks another engine holds (locality "REMOTE").
	Remote uint64
	// Undecodable counts events that did not decode (Event.Invalid).
	Undecodable uint64
}

// Reasons lists the counts by their metric label.
func (s Skipped) Reasons() map[string]uint64 {
	return map[string]uint64{"unknown_parent": s.UnknownParent, "extra_keys": s.ExtraKeys, "other_group": s.OtherGroup,
		"unknown_tier": s.UnknownTier, "unknown_lora": s.UnknownLoRA, "unknown_block": s.UnknownBlock,
		"multimodal": s.Multimodal, "cache_salt": s.CacheSalt, "prompt_embeds": s.PromptEmbeds,
		"unknown_offload": s.UnknownOffload, "undecodable_event": s.Undecodable, "remote": s.Remote, "group_kind": s.GroupKind}
}

type block struct {
	kv        uint64
	parent    uint64
	hasParent bool
	lora      uint32
	tiers     uint8 // bit per wire tier
	// parentEng is the engine hash of the parent ("" for none), to walk an
	// offloaded block's chain back; span is how many GPU blocks the
	// lower-tier copy ending here covers (offload.go).
	parentEng Hash
	span      uint8
	// refs counts, per lower tier, the offloaded copies that announced the
	// block: vLLM re-announces a hash shared by overlapping chunks once per
	// chunk and expects consumers to count (offloading/events.py at
	// 030ea52effcb05071543c8c42b8f0145e94cee43).
	refs [wire.NumTiers]uint16
}

// LoRA names an adapter the engine serves: vLLM's name for it, its integer
// id in vLLM (older events carry only that), and the id announced to routers.
type LoRA struct {
	Name   string
	VLLMID int
	WireID uint32
}

// NewTranslator returns a translator hashing with h.
func NewTranslator(h *kvstore.Hasher, loras []LoRA) *Translator {
	t := &Translator{h: h, loras: map[string]uint32{}, byID: map[int]uint32{}, ranks: map[int]map[Hash]*block{},
		groupTables: map[rankGroup]map[Hash]*block{}, groups: groupMap{primary: -1}}
	for _, l := range loras {
		t.loras[l.Name] = l.WireID
		if l.VLLMID != 0 {
			t.byID[l.VLLMID] = l.WireID
		}
	}
	return t
}

func tierOf(medium string) (wire.Tier, bool) {
	switch medium {
	case "", "GPU", "gpu":
		return wire.TierGPU, true
	case "CPU", "cpu", "CPU_PINNED":
		return wire.TierCPU, true
	case "DISK", "Disk", "disk", "LOCAL_DISK", "NVME", "STORAGE":
		// "Disk": DiskLoadStoreSpec.medium() (vllm/v1/kv_offload/mediums.py
		// at 0c2bbc477d0d615ee4d2581bbdfa966054db20f0); "STORAGE":
		// MEDIUM_STORAGE of the newest kv_events.py.
		return wire.TierDisk, true
	}
	return 0, false
}

func (t *Translator) table(rank int, group uint16) map[Hash]*block {
	if group != 0 {
		return t.groupTable(rank, group)
	}
	tb := t.ranks[rank]
	if tb == nil {
		tb = map[Hash]*block{}
		t.ranks[rank] = tb
	}
	return tb
}

// Apply translates one batch of a rank into wire events.
func (t *Translator) Apply(rank int, evs []Event) []wire.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []wire.Event
	for i := range evs {
		ev := &evs[i]
		if ev.Invalid != "" {
			t.skipped.Undecodable++
			continue
		}
		if ev.Locality == "REMOTE" || ev.Locality == "remote" {
			t.skipped.Remote += uint64(len(ev.BlockHashes))
			continue
		}
		group, ok := uint16(0), true
		if ev.Kind != AllBlocksCleared {
			if group, ok = t.groupOf(ev); !ok {
				continue
			}
		}
		tb, from := t.table(rank, group), len(out)
		out = t.translate(rank, tb, ev, out)
		for j := from; j < len(out); j++ {
			out[j].Group = group
		}
	}
	return out
}

// translate appends the wire events of one event of a rank's group whose
// blocks are in tb.
func (t *Translator) translate(rank int, tb map[Hash]*block, ev *Event, out []wire.Event) []wire.Event {
	switch ev.Kind {
	case AllBlocksCleared: // every group's (PROTOCOL.md 6.3)
		t.clearRank(rank)
		for tier := range wire.Tier(wire.NumTiers) {
			out = append(out, wire.Event{Kind: wire.EventCleared, Tier: tier})
		}
	case BlockRemoved:
		tier, ok := tierOf(ev.Medium)
		if !ok {
			t.skipped.UnknownTier++
			return out
		}
		if tier != wire.TierGPU {
			return t.offloadRemoved(tb, tier, ev, out)
		}
		var hs []uint64
		for _, eh := range ev.BlockHashes {
			b := tb[eh]
			if b == nil || b.tiers&(1<<tier) == 0 {
				t.skipped.UnknownBlock++
				continue
			}
			hs = append(hs, b.kv)
			if b.tiers &^= 1 << tier; b.tiers == 0 {
				delete(tb, eh)
			}
		}
		if len(hs) > 0 {
			out = append(out, wire.Event{Kind: wire.EventRemoved, Tier: tier, Hashes: wire.HashesOf(hs)})
		}
	case BlockStored:
		if len(ev.TokenIDs) == 0 {
			out = t.offloadStored(tb, ev, out)
		} else if e, ok := t.stored(tb, ev); ok {
			out = append(out, e)
		}
	}
	return out
}

// stored translates one BlockStored: the kvgate hashes chain from the
// parent's kvgate hash.
func (t *Translator) stored(tb map[Hash]*block, ev *Event) (wire.Event, bool) {
	tier, ok := tierOf(ev.Medium)
	if !ok {
		t.skipped.UnknownTier++
		return wire.Event{}, false
	}
	var lora uint32
	switch {
	case ev.LoRAName != "":
		if lora, ok = t.loras[ev.LoRAName]; !ok {
			t.skipped.UnknownLoRA++
			return wire.Event{}, false
		}
	case ev.LoRAID != 0:
		if lora, ok = t.byID[ev.LoRAID]; !ok {
			t.skipped.UnknownLoRA++
			return wire.Event{}, false
		}
	}
	var parent uint64
	hasParent := ev.Parent != ""
	if hasParent {
		p := tb[ev.Parent]
		if p == nil {
			t.skipped.UnknownParent += uint64(len(ev.BlockHashes))
			return wire.Event{}, false
		}
		parent = p.kv
	}
	n := len(ev.BlockHashes)
	for i, extra := range ev.ExtraKeys {
		if i < n && !t.indexable(ev, i, extra) {
			// This block and every later one in the chain depend on keys
			// the router cannot know: index the blocks before it.
			*t.extraReason(extra) += uint64(n - i)
			n = i
			break
		}
	}
	if n == 0 {
		return wire.Event{}, false
	}
	var keys *kvstore.Keys
	if lora != 0 {
		keys = &kvstore.Keys{LoRAID: lora}
	}
	kv, err := t.chain(ev, n, parent, hasParent, keys) // multimodal_events.go
	if err == nil {
		kv = t.groups.perBlock(kv, ev, t.h.BlockSize())
	}
	if err != nil || len(kv) != n {
		t.skipped.UnknownBlock += uint64(n)
		return wire.Event{}, false
	}
	prev, prevOK, prevEng := parent, hasParent, ev.Parent
	for i, eh := range ev.BlockHashes[:n] {
		b := tb[eh]
		if b == nil {
			b = &block{kv: kv[i], parent: prev, hasParent: prevOK, lora: lora, parentEng: prevEng}
			tb[eh] = b
		}
		b.tiers |= 1 << tier
		if tier != wire.TierGPU {
			b.refs[tier]++
		}
		prev, prevOK, prevEng = kv[i], true, eh
	}
	if tier == wire.TierGPU {
		t.gpuBlockSize = ev.BlockSize
	}
	return wire.Event{Kind: wire.EventStored, Tier: tier, HasParent: hasParent, Parent: parent, LoRAID: lora,
		Hashes: wire.HashesOf(kv)}, true
}

// extraReason is the counter for a block whose extra keys hold more than
// its adapter.
func (t *Translator) extraReason(x Extra) *uint64 {
	switch {
	case x&ExtraMultimodal != 0:
		return &t.skipped.Multimodal
	case x&ExtraCacheSalt != 0:
		return &t.skipped.CacheSalt
	case x&ExtraPromptEmbeds != 0:
		return &t.skipped.PromptEmbeds
	}
	return &t.skipped.ExtraKeys
}

// Reset forgets a rank's blocks (after events were lost for good) and
// returns the events that tell a router to forget them too.
func (t *Translator) Reset(rank int) []wire.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearRank(rank)
	out := make([]wire.Event, 0, wire.NumTiers)
	for tier := range wire.Tier(wire.NumTiers) {
		out = append(out, wire.Event{Kind: wire.EventCleared, Tier: tier})
	}
	return out
}

// Snapshot returns a rank's blocks as STORED events, one per block, each
// with its parent (a router applies them in any order it likes; the index
// is a set of blocks).
func (t *Translator) Snapshot(rank int) []wire.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []wire.Event
	for group, tb := range t.rankTables(rank) {
		for _, b := range tb {
			for tier := range wire.Tier(wire.NumTiers) {
				if b.tiers&(1<<tier) != 0 {
					out = append(out, wire.Event{Kind: wire.EventStored, Tier: tier, Group: group, HasParent: b.hasParent,
						Parent: b.parent, LoRAID: b.lora, Hashes: wire.HashesOf([]uint64{b.kv})})
				}
			}
		}
	}
	return out
}

// BlockSize is the block size, in tokens, kvgate hashes blocks of.
func (t *Translator) BlockSize() int { return t.h.BlockSize() }

// Blocks counts a rank's translated blocks.
func (t *Translator) Blocks(rank int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tb := range t.rankTables(rank) {
		n += len(tb)
	}
	return n
}

// Skipped returns the counts of what was not translated.
func (t *Translator) Skipped() Skipped {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.skipped
}
