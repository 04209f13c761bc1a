// Package vllm speaks what an unmodified vLLM (or SGLang) engine speaks:
// its KV cache events (msgpack over ZMQ, in both encodings vLLM has used),
// its streaming OpenAI completions API with token ids, and its Prometheus
// metrics. kvgate-bridge turns them into the kvgate wire protocol.
//
// The event schema follows vllm/distributed/kv_events.py (vllm-project/vllm
// at commit 0181ea3173e53eea8cf04a86891488e3dc89bb34): a KVEventBatch is
// (ts, events, data_parallel_rank); events are tagged BlockStored,
// BlockRemoved and AllBlocksCleared. Older vLLM (kv_events.py at
// b4e69e0af33f4698e157a262cc787fe61983cd3d) encodes batches and events as
// positional arrays (msgspec array_like, the tag first); newer vLLM as
// maps, events carrying their tag under "type". Block hashes are integers
// in older versions and bytes in newer ones.
//
// BlockStored, every field of 0181ea3 in declaration order (a positional
// event lists them after its tag; trailing fields at their default are
// omitted, and fields a later vLLM may add after them are ignored):
//
//	| block_hashes | parent_block_hash | token_ids | block_size | lora_id |
//	| medium | lora_name | extra_keys | group_idx | kv_cache_spec_kind |
//	| kv_cache_spec_sliding_window |
//
// BlockRemoved: | block_hashes | medium | group_idx |. AllBlocksCleared: no
// fields. The newest vLLM adds locality and ownership to both (and
// session_id to BlockStored), as its offloading connector's events.py at
// 030ea52effcb05071543c8c42b8f0145e94cee43 sends them: decoded by name
// from maps, and after kv_cache_spec_sliding_window (BlockStored) or
// group_idx (BlockRemoved) from arrays.
//
// SGLang publishes the same batches (sglang.go says where they differ).
//
// One event that does not decode costs only itself: DecodeBatch marks it
// Invalid and decodes the rest of the batch (the translator counts it).
package vllm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvgate/kvgate/wire"
)

// EventKind is a vLLM KV cache event type.
type EventKind uint8

// Event kinds, by their msgspec tag.
const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

var eventKindNames = [...]string{"", "BlockStored", "BlockRemoved", "AllBlocksCleared"}

// String returns the kind's msgspec tag.
func (k EventKind) String() string {
	if k >= BlockStored && k <= AllBlocksCleared {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Hash is an engine block hash, whatever its encoding: an integer is kept
// as its 8 big-endian bytes prefixed with 'i', bytes with 'b', so the two
// never collide and either works as a map key.
type Hash string

// Event is one decoded vLLM KV cache event.
type Event struct {
	Kind        EventKind
	BlockHashes []Hash
	Parent      Hash // "" when the chain starts at the prompt
	TokenIDs    []uint32
	BlockSize   int
	LoRAID      int // 0: none
	LoRAName    string
	Medium      string // "GPU", "CPU", ... ("" means GPU)
	// ExtraKeys holds, per block, what vLLM hashed into it besides its
	// tokens (see Extra); nil when the event carries no extra_keys.
	ExtraKeys []Extra
	// MMKeys holds, per block, the multimodal items among its extra keys
	// (multimodal_events.go); nil when no block has any.
	MMKeys   [][]MMKey
	GroupIdx int
	// KVCacheSpecKind and SlidingWindow describe the attention group
	// (kv_cache_spec_kind, kv_cache_spec_sliding_window; "" and 0 when not
	// sent).
	KVCacheSpecKind string
	SlidingWindow   int
	// Locality ("LOCAL", "REMOTE": relative to the publisher) and
	// Ownership (the secondary offloading tier that produced the event)
	// are what the newest vLLM adds ("" when not sent).
	Locality, Ownership string
	// Invalid says why the event did not decode ("" when it did); such an
	// event carries only its Kind (when its tag was readable).
	Invalid string
}

// Extra is a set of the kinds of extra keys vLLM hashed into one block.
// vLLM's generate_block_hash_extra_keys (vllm/v1/core/kv_cache_utils.py at
// 001cabc1be16a59a70d720ed61a13b678c060a18) builds a block's key as
// lora_keys + mm_keys + cache_salt_keys + prompt_embeds_keys:
// [lora_name] for a LoRA request, (mm identifier, offset in block) per
// multimodal item, the cache_salt string on the first block only, and the
// sha256 digest of the block's prompt embeddings.
type Extra uint8

// Kinds of extra keys. A string other than the adapter name counts as the
// cache salt on a prompt's first block (no parent, first in its event) and
// as a multimodal hash elsewhere (older vLLM keyed multimodal items by a
// bare hash string).
const (
	ExtraLoRA Extra = 1 << iota
	ExtraMultimodal
	ExtraCacheSalt
	ExtraPromptEmbeds
	ExtraUnknown
)

// Batch is one KVEventBatch.
type Batch struct {
	TS      float64
	Events  []Event
	DPRank  int
	HasRank bool
}

var errSchema = errors.New("vllm: KV event batch does not match the schema")

// DecodeBatch decodes a msgpack KVEventBatch in either encoding.
func DecodeBatch(payload []byte) (*Batch, error) {
	if err := checkShape(payload); err != nil {
		return nil, err
	}
	d := msgpack.NewDecoder(bytes.NewReader(payload))
	d.SetMapDecoder(decodeMap)
	v, err := d.DecodeInterface()
	if err != nil {
		return nil, fmt.Errorf("vllm: decoding msgpack: %w", err)
	}
	var b Batch
	var events []any
	switch t := v.(type) {
	case []any: // [ts, events, data_parallel_rank?]
		if len(t) < 2 || len(t) > 3 {
			return nil, fmt.Errorf("%w: batch array of %d fields", errSchema, len(t))
		}
		b.TS, _ = number(t[0])
		if events, _ = t[1].([]any); events == nil && t[1] != nil {
			return nil, fmt.Errorf("%w: events is %T", errSchema, t[1])
		}
		if len(t) == 3 && t[2] != nil {
			b.DPRank, b.HasRank = intOf(t[2])
		}
	case map[any]any:
		b.TS, _ = number(t["ts"])
		if events, _ = t["events"].([]any); events == nil && t["events"] != nil {
			return nil, fmt.Errorf("%w: events is %T", errSchema, t["events"])
		}
		if r, ok := t["data_parallel_rank"]; ok && r != nil {
			b.DPRank, b.HasRank = intOf(r)
		}
	default:
		return nil, fmt.Errorf("%w: batch is %T", errSchema, v)
	}
	for _, raw := range events {
		ev, err := decodeEvent(raw)
		if err != nil {
			ev = Event{Kind: ev.Kind, Invalid: err.Error()}
		}
		b.Events = append(b.Events, ev)
	}
	return &b, nil
}

// decodeMap reads a map whose keys must be strings (msgspec structs are):
// the library's own untyped map would panic on a key that cannot be
// hashed (found by FuzzDecodeBatch).
func decodeMap(d *msgpack.Decoder) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	m := make(map[any]any, min(n, 64))
	for range n {
		k, err := d.DecodeInterface()
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("%w: map key %T", errSchema, k)
		}
		if m[ks], err = d.DecodeInterface(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Field order of the positional encodings (after the tag), as declared in
// kv_events.py at 0181ea3; older versions simply end earlier, later ones
// may add fields after these.
var (
	storedFields = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
		"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality", "ownership", "session_id"}
	removedFields = []string{"block_hashes", "medium", "group_idx", "locality", "ownership"}
)

func decodeEvent(raw any) (Event, error) {
	var tag string
	fields := map[string]any{}
	switch t := raw.(type) {
	case []any:
		if len(t) == 0 {
			return Event{}, fmt.Errorf("%w: empty event", errSchema)
		}
		tag, _ = t[0].(string)
		names := map[string][]string{"BlockStored": storedFields, "BlockRemoved": removedFields}[tag]
		// Fields past the ones we know are a later vLLM's: ignored.
		for i, v := range t[1:] {
			if i < len(names) {
				fields[names[i]] = v
			}
		}
	case map[any]any:
		tag, _ = t["type"].(string)
		for k, v := range t {
			if ks, ok := k.(string); ok {
				fields[ks] = v
			}
		}
	default:
		return Event{}, fmt.Errorf("%w: event is %T", errSchema, raw)
	}
	var ev Event
	var err error
	switch tag {
	case "BlockStored":
		ev.Kind = BlockStored
		err = decodeStored(&ev, fields)
	case "BlockRemoved":
		ev.Kind = BlockRemoved
		ev.BlockHashes, err = hashes(fields["block_hashes"])
	case "AllBlocksCleared":
		ev.Kind = AllBlocksCleared
	default:
		return ev, fmt.Errorf("%w: unknown event type %q", errSchema, tag)
	}
	if err != nil {
		return ev, err
	}
	var ok bool
	if ev.Medium, ok = fields["medium"].(string); !ok && fields["medium"] != nil {
		return ev, fmt.Errorf("%w: medium is %T", errSchema, fields["medium"])
	}
	ev.GroupIdx, _ = intOf(fields["group_idx"])
	ev.Locality, _ = fields["locality"].(string)
	ev.Ownership, _ = fields["ownership"].(string)
	return ev, nil
}

// decodeStored reads a BlockStored's fields. An offloading connector's
// event has no token ids and block_size 0 or the offloaded block's size
// (see offload.go); a GPU event has block_size tokens per block.
func decodeStored(ev *Event, fields map[string]any) error {
	var err error
	if ev.BlockHashes, err = hashes(fields["block_hashes"]); err != nil {
		return err
	}
	if p := fields["parent_block_hash"]; p != nil {
		if ev.Parent, err = hashOf(p); err != nil {
			return err
		}
	}
	if ev.TokenIDs, err = tokens(fields["token_ids"]); err != nil {
		return err
	}
	var ok bool
	if ev.BlockSize, ok = intOf(fields["block_size"]); !ok || ev.BlockSize < 0 || (ev.BlockSize == 0 && len(ev.TokenIDs) > 0) {
		return fmt.Errorf("%w: block_size %v", errSchema, fields["block_size"])
	}
	if len(ev.TokenIDs) > 0 && len(ev.TokenIDs) != ev.BlockSize*len(ev.BlockHashes) {
		return fmt.Errorf("%w: %d token ids for %d blocks of %d", errSchema, len(ev.TokenIDs), len(ev.BlockHashes), ev.BlockSize)
	}
	ev.LoRAID, _ = intOf(fields["lora_id"])
	ev.LoRAName, _ = fields["lora_name"].(string)
	if ks, ok := fields["extra_keys"].([]any); ok {
		ev.ExtraKeys = make([]Extra, len(ks))
		for i, k := range ks {
			ev.ExtraKeys[i] = classifyExtra(k, ev, i == 0 && ev.Parent == "")
		}
		ev.MMKeys = mmKeysOf(ks, ev)
	}
	if sglangSalt(fields) != "" {
		markSalted(ev) // sglang.go
	}
	ev.KVCacheSpecKind, _ = fields["kv_cache_spec_kind"].(string)
	ev.SlidingWindow, _ = intOf(fields["kv_cache_spec_sliding_window"])
	return nil
}

// classifyExtra sorts one block's extra keys (nil or a tuple, in vLLM's
// order: LoRA, multimodal, salt, prompt embeddings) into kinds. The
// adapter is recognised by its name (current vLLM) or its integer id. A
// later kv_events.py sends each key as a typed struct (typedExtra).
func classifyExtra(k any, ev *Event, first bool) Extra {
	keys, ok := k.([]any)
	if !ok {
		if k == nil {
			return 0
		}
		return ExtraUnknown
	}
	var x Extra
	for i, key := range keys {
		switch t := key.(type) {
		case string:
			switch {
			case i == 0 && ev.LoRAName != "" && t == ev.LoRAName:
				x |= ExtraLoRA
			case first:
				x |= ExtraCacheSalt
			default:
				x |= ExtraMultimodal
			}
		case []any:
			x |= ExtraMultimodal
		case []byte:
			x |= ExtraPromptEmbeds
		case map[any]any:
			x |= typedExtra(t, ev)
		default:
			if n, isInt := intOf(key); isInt && i == 0 && ev.LoRAID != 0 && n == ev.LoRAID {
				x |= ExtraLoRA
			} else {
				x |= ExtraUnknown
			}
		}
	}
	return x
}

// typedExtra classifies one typed extra key of a later kv_events.py (read
// in the index without a repository or commit to pin; see
// testdata/tagged_typed_extra_keys.hex): ExtraKey structs tagged under
// "type", LoRAKey "lora" naming the adapter (which names the event's
// adapter when lora_name does not), CacheSaltKey "cache_salt",
// PromptEmbedsKey "prompt_embeds", MultiModalKey "mm", and LegacyExtraKey
// "legacy" for what it does not classify itself, unknown here too.
func typedExtra(k map[any]any, ev *Event) Extra {
	switch k["type"] {
	case "lora":
		name, _ := k["name"].(string)
		if ev.LoRAName == "" {
			ev.LoRAName = name
		}
		if name != "" && name == ev.LoRAName {
			return ExtraLoRA
		}
	case "cache_salt":
		return ExtraCacheSalt
	case "prompt_embeds":
		return ExtraPromptEmbeds
	case "mm":
		return ExtraMultimodal
	}
	return ExtraUnknown
}

// specKind maps vLLM's kv_cache_spec_kind (the values of its
// KVCacheSpecKind: vllm/v1/kv_cache_interface.py in the vLLM versions whose
// kv_events.py sends the field) onto the group kinds kvgate indexes; false
// for kinds it cannot (chunked local, cross or encoder-only attention,
// unknown).
func specKind(s string) (wire.GroupKind, bool) {
	switch s {
	case "full_attention", "mla_attention", "sink_full_attention":
		return wire.GroupFull, true
	case "sliding_window", "sliding_window_mla":
		return wire.GroupSlidingWindow, true
	case "mamba":
		return wire.GroupMamba, true
	}
	return 0, false
}
