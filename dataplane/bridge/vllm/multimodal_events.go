package vllm

import (
	"encoding/binary"
	"encoding/hex"
	"github.com/kvgate/kvgate/kvstore"
	"math"
	"slices"
	"strings"
)

// vLLM hashes every image overlapping a block into the block as the extra
// key (identifier, offset - start_token_idx): the item's identifier and its
// first token relative to the block's first, negative when it began in an
// earlier block (vllm/v1/core/kv_cache_utils.py _gen_mm_extra_hash_keys at
// 001cabc1be16a59a70d720ed61a13b678c060a18). BlockStored carries them per
// block (kv_events.py at 0181ea3173e53eea8cf04a86891488e3dc89bb34: "Exposed
// for external KV cache consumers to reconstruct block hashes"); msgspec
// writes the tuple as a two-element array, [str, int]. A later kv_events.py
// writes it as a typed key instead, {"type": "mm", "modality", "hash",
// "block_offset"}, its hash without the adapter prefix.
//
// The identifier is the mm_hash the request gave (multimodal.go sends
// kvgate's content id in hex), or "<adapter>:<mm_hash>" when vLLM runs
// with --enable-tower-connector-lora (InputProcessor._get_mm_identifier).
// kvgate's block hash takes the same item as | 0x03 | key u64 | offset
// i32 |, key being the id's low 64 bits, so a block whose every identifier
// is a kvgate id translates from the event alone. One that is not (an
// image sent to vLLM by another client, hashed by vLLM itself) cannot be,
// and is counted and skipped with the rest of its chain.

// MMKey is one multimodal item vLLM hashed into a block.
type MMKey struct {
	// Identifier is vLLM's identifier of the item.
	Identifier string
	// Offset is the item's first token relative to the block's first.
	Offset int
}

// mmKeysOf reads the multimodal items of each block's extra keys ks (as
// classifyExtra sorts them); nil when no block has any. A block with an
// item in a shape that names no offset (older vLLM's bare hash strings)
// gets none, which leaves it untranslatable.
func mmKeysOf(ks []any, ev *Event) [][]MMKey {
	var out [][]MMKey
	for i, k := range ks {
		keys, ok := mmKeysOfBlock(k, ev, i == 0 && ev.Parent == "")
		if len(keys) == 0 && ok {
			continue
		}
		if out == nil {
			out = make([][]MMKey, len(ks))
		}
		out[i] = keys
	}
	return out
}

// mmKeysOfBlock reads one block's items; false when one has no readable
// identifier and offset.
func mmKeysOfBlock(k any, ev *Event, first bool) ([]MMKey, bool) {
	entries, _ := k.([]any)
	var out []MMKey
	for i, e := range entries {
		switch t := e.(type) {
		case []any: // (identifier, offset)
			id, okID := pairID(t)
			off, okOff := pairOffset(t)
			if !okID || !okOff {
				return nil, false
			}
			out = append(out, MMKey{Identifier: id, Offset: off})
		case map[any]any:
			if t["type"] != "mm" {
				continue
			}
			id, okID := t["hash"].(string)
			off, okOff := intOf(t["block_offset"])
			if !okID || !okOff {
				return nil, false
			}
			out = append(out, MMKey{Identifier: id, Offset: off})
		case string:
			if !(i == 0 && t == ev.LoRAName) && !first {
				return nil, false // a bare multimodal hash: no offset
			}
		}
	}
	return out, true
}

func pairID(t []any) (string, bool) {
	if len(t) != 2 {
		return "", false
	}
	s, ok := t[0].(string)
	return s, ok
}

func pairOffset(t []any) (int, bool) {
	if len(t) != 2 {
		return 0, false
	}
	return intOf(t[1])
}

// kvgateKey is the u64 kvgate hashes an item with, from its vLLM
// identifier: 32 hex digits (a kvgate content id), optionally after the
// event's own adapter name and a colon; false for anything else.
func kvgateKey(id, lora string) (uint64, bool) {
	if lora != "" {
		id = strings.TrimPrefix(id, lora+":")
	}
	if len(id) != 32 || strings.ToLower(id) != id {
		return 0, false
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(id)); err != nil {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[8:]), true
}

// translateMM appends a block's items as kvgate's to dst, or reports false
// when one is not a kvgate id or its offset is out of kvgate's range.
func translateMM(dst []kvstore.BlockMM, keys []MMKey, lora string) ([]kvstore.BlockMM, bool) {
	out := dst
	for _, k := range keys {
		key, ok := kvgateKey(k.Identifier, lora)
		if !ok || k.Offset < math.MinInt32 || k.Offset > math.MaxInt32 {
			return nil, false
		}
		out = append(out, kvstore.BlockMM{Hash: key, RelOffset: int32(k.Offset)})
	}
	return out, true
}

// indexable reports whether block i of ev, whose extra keys are of kinds
// extra, can be given kvgate's hash: keys of no kind but the adapter and
// images, and images only of kvgate's ids, in blocks of kvgate's size (a
// larger vLLM block's items cannot be split: the keys carry no lengths).
func (t *Translator) indexable(ev *Event, i int, extra Extra) bool {
	if extra&^(ExtraLoRA|ExtraMultimodal) != 0 {
		return false
	}
	if extra&ExtraMultimodal == 0 {
		return true
	}
	if ev.BlockSize != t.h.BlockSize() || i >= len(ev.MMKeys) || len(ev.MMKeys[i]) == 0 {
		return false
	}
	var buf [4]kvstore.BlockMM
	_, ok := translateMM(buf[:0], ev.MMKeys[i], ev.LoRAName)
	return ok
}

// chain is kvgate's hashes of the first n blocks of ev, continuing from
// parent: Hasher.Chain over their tokens, or block by block when some
// carry images (each of which indexable let through), the adapter of keys
// in every block.
func (t *Translator) chain(ev *Event, n int, parent uint64, hasParent bool, keys *kvstore.Keys) ([]uint64, error) {
	toks := ev.TokenIDs[:min(n*ev.BlockSize, len(ev.TokenIDs))]
	if !slices.ContainsFunc(ev.MMKeys[:min(n, len(ev.MMKeys))], func(k []MMKey) bool { return len(k) > 0 }) {
		return t.h.Chain(nil, parent, hasParent, toks, keys)
	}
	if !hasParent {
		parent = t.h.Root()
	}
	var x kvstore.BlockExtra
	if keys != nil {
		x.LoRAID = keys.LoRAID
	}
	out := make([]uint64, 0, n)
	for i := range n {
		x.MM = x.MM[:0]
		if i < len(ev.MMKeys) {
			x.MM, _ = translateMM(x.MM, ev.MMKeys[i], ev.LoRAName)
		}
		h, err := t.h.HashBlock(parent, toks[i*ev.BlockSize:(i+1)*ev.BlockSize], &x)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
		parent = h
	}
	return out, nil
}
