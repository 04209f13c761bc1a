// Package vllmtest is a fake vLLM for tests: the streaming completions API
// with token ids, Prometheus metrics, and a ZMQ KV event publisher with a
// replay socket, encoding events exactly as vLLM's kv_events.py does with
// msgspec (vllm-project/vllm at 0181ea3173e53eea8cf04a86891488e3dc89bb34).
// Started with the SGLang encoding it is a fake SGLang server instead
// (sglang.go): the same cache and publisher, SGLang's HTTP API, metrics
// and per-page events.
package vllmtest

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// Encoding is one of the two encodings vLLM has used for event batches.
type Encoding int

const (
	// Positional is older vLLM: msgspec array_like structs, the tag as the
	// first element, integer block hashes.
	Positional Encoding = iota
	// Tagged is newer vLLM: structs as maps, events tagged under "type",
	// block hashes as bytes, defaulted fields omitted.
	Tagged
	// PositionalCurrent is the current schema (every field of kv_events.py
	// at 0181ea3) as an array_like encoding writes it: all fields in
	// declaration order, trailing defaulted ones omitted.
	PositionalCurrent
	// SGLang is SGLang's copy of the publisher (disaggregation/kv_events.py,
	// see ../sglang.go): Positional's shapes, [ts, events, attn_dp_rank]
	// batches and vLLM's first six BlockStored fields (medium sixth),
	// with signed int64 hashes, negative ones as msgpack ints. A fake
	// started with it is a fake SGLang server (sglang.go).
	SGLang
)

// newerFields reports whether enc writes the fields vLLM added after the
// positional schema.
func (enc Encoding) newerFields() bool { return enc == Tagged || enc == PositionalCurrent }

// EncodeBatch encodes a batch as msgspec would. Hashes made with IntHash
// encode as integers, others as bytes.
func EncodeBatch(enc Encoding, b *vllm.Batch) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.UseCompactInts(true)
	e.UseCompactFloats(false)
	if enc != Tagged {
		n := 2
		if b.HasRank {
			n = 3
		}
		_ = e.EncodeArrayLen(n)
		_ = e.EncodeFloat64(b.TS)
		encodeEvents(e, enc, b.Events)
		if b.HasRank {
			_ = e.EncodeInt(int64(b.DPRank))
		}
		return buf.Bytes()
	}
	n := 2
	if b.HasRank {
		n = 3
	}
	_ = e.EncodeMapLen(n)
	_ = e.EncodeString("ts")
	_ = e.EncodeFloat64(b.TS)
	_ = e.EncodeString("events")
	encodeEvents(e, enc, b.Events)
	if b.HasRank {
		_ = e.EncodeString("data_parallel_rank")
		_ = e.EncodeInt(int64(b.DPRank))
	}
	return buf.Bytes()
}

func encodeEvents(e *msgpack.Encoder, enc Encoding, evs []vllm.Event) {
	_ = e.EncodeArrayLen(len(evs))
	for i := range evs {
		encodeEvent(e, enc, &evs[i])
	}
}

// field is one struct field in declaration order; omit marks a default
// value msgspec's omit_defaults leaves out (only for fields with defaults).
type field struct {
	name string
	put  func()
	omit bool
}

func encodeEvent(e *msgpack.Encoder, enc Encoding, ev *vllm.Event) {
	var tag string
	var fields []field
	str := func(s string) func() {
		return func() {
			if s == "" {
				_ = e.EncodeNil()
			} else {
				_ = e.EncodeString(s)
			}
		}
	}
	switch ev.Kind {
	case vllm.BlockStored:
		tag = "BlockStored"
		fields = []field{
			{"block_hashes", func() { encodeHashes(e, ev.BlockHashes, enc == SGLang) }, false},
			{"parent_block_hash", func() { encodeHash(e, ev.Parent, enc == SGLang) }, false},
			{"token_ids", func() {
				_ = e.EncodeArrayLen(len(ev.TokenIDs))
				for _, t := range ev.TokenIDs {
					_ = e.EncodeUint(uint64(t))
				}
			}, false},
			{"block_size", func() { _ = e.EncodeInt(int64(ev.BlockSize)) }, false},
			{"lora_id", func() {
				if ev.LoRAID == 0 {
					_ = e.EncodeNil()
				} else {
					_ = e.EncodeInt(int64(ev.LoRAID))
				}
			}, false},
			{"medium", str(ev.Medium), false},
		}
		if enc.newerFields() {
			fields = append(fields,
				field{"lora_name", str(ev.LoRAName), false},
				field{"extra_keys", func() { encodeExtraKeys(e, ev) }, len(ev.ExtraKeys) == 0},
				field{"group_idx", func() { _ = e.EncodeInt(int64(ev.GroupIdx)) }, ev.GroupIdx == 0},
				field{"kv_cache_spec_kind", str(ev.KVCacheSpecKind), ev.KVCacheSpecKind == ""},
				field{"kv_cache_spec_sliding_window", func() { _ = e.EncodeInt(int64(ev.SlidingWindow)) }, ev.SlidingWindow == 0},
				field{"locality", str(ev.Locality), ev.Locality == ""},
				field{"ownership", str(ev.Ownership), ev.Ownership == ""})
		}
	case vllm.BlockRemoved:
		tag = "BlockRemoved"
		fields = []field{
			{"block_hashes", func() { encodeHashes(e, ev.BlockHashes, enc == SGLang) }, false},
			{"medium", str(ev.Medium), false},
		}
		if enc.newerFields() {
			fields = append(fields, field{"group_idx", func() { _ = e.EncodeInt(int64(ev.GroupIdx)) }, ev.GroupIdx == 0},
				field{"locality", str(ev.Locality), ev.Locality == ""},
				field{"ownership", str(ev.Ownership), ev.Ownership == ""})
		}
	case vllm.AllBlocksCleared:
		tag = "AllBlocksCleared"
	}
	if enc != Tagged {
		// array_like: omit_defaults drops only trailing defaulted fields.
		for len(fields) > 0 && fields[len(fields)-1].omit {
			fields = fields[:len(fields)-1]
		}
		_ = e.EncodeArrayLen(1 + len(fields))
		_ = e.EncodeString(tag)
		for _, f := range fields {
			f.put()
		}
		return
	}
	n := 1
	for _, f := range fields {
		if !f.omit {
			n++
		}
	}
	_ = e.EncodeMapLen(n)
	_ = e.EncodeString("type")
	_ = e.EncodeString(tag)
	for _, f := range fields {
		if !f.omit {
			_ = e.EncodeString(f.name)
			f.put()
		}
	}
}

// encodeExtraKeys writes each block's extra keys as vLLM's
// generate_block_hash_extra_keys orders them: the adapter's name (or, with
// no name, its id), a (mm identifier, offset) pair, the cache salt, the
// prompt embeddings' digest; nil for a block with none. A block's
// multimodal items are its MMKeys, or one placeholder pair without them.
func encodeExtraKeys(e *msgpack.Encoder, ev *vllm.Event) {
	_ = e.EncodeArrayLen(len(ev.ExtraKeys))
	for i, x := range ev.ExtraKeys {
		var keys []func()
		if x&vllm.ExtraLoRA != 0 {
			if ev.LoRAName != "" {
				keys = append(keys, func() { _ = e.EncodeString(ev.LoRAName) })
			} else {
				keys = append(keys, func() { _ = e.EncodeInt(int64(ev.LoRAID)) })
			}
		}
		if x&vllm.ExtraMultimodal != 0 {
			mm := []vllm.MMKey{{Identifier: "mm-hash"}}
			if i < len(ev.MMKeys) && len(ev.MMKeys[i]) > 0 {
				mm = ev.MMKeys[i]
			}
			for _, k := range mm {
				keys = append(keys, func() { _ = e.EncodeArrayLen(2); _ = e.EncodeString(k.Identifier); _ = e.EncodeInt(int64(k.Offset)) })
			}
		}
		if x&vllm.ExtraCacheSalt != 0 {
			keys = append(keys, func() { _ = e.EncodeString("salt") })
		}
		if x&vllm.ExtraPromptEmbeds != 0 {
			keys = append(keys, func() { _ = e.EncodeBytes([]byte{0xe0}) })
		}
		if x&vllm.ExtraUnknown != 0 {
			keys = append(keys, func() { _ = e.EncodeBool(true) })
		}
		if len(keys) == 0 {
			_ = e.EncodeNil()
			continue
		}
		_ = e.EncodeArrayLen(len(keys))
		for _, k := range keys {
			k()
		}
	}
}

func encodeHashes(e *msgpack.Encoder, hs []vllm.Hash, signed bool) {
	_ = e.EncodeArrayLen(len(hs))
	for _, h := range hs {
		encodeHash(e, h, signed)
	}
}

// encodeHash writes h; signed writes an integer hash as the int64 of its
// bits, as SGLang's Python ints are.
func encodeHash(e *msgpack.Encoder, h vllm.Hash, signed bool) {
	switch {
	case h == "":
		_ = e.EncodeNil()
	case h[0] == 'i' && len(h) == 9:
		var n uint64
		for i := 1; i < 9; i++ {
			n = n<<8 | uint64(h[i])
		}
		if signed {
			_ = e.EncodeInt(int64(n))
			return
		}
		_ = e.EncodeUint(n)
	default:
		_ = e.EncodeBytes([]byte(h[1:]))
	}
}

// IntHash is an integer engine hash (older vLLM).
func IntHash(n uint64) vllm.Hash {
	b := []byte{'i', 0, 0, 0, 0, 0, 0, 0, 0}
	for i := range 8 {
		b[8-i] = byte(n >> (8 * i))
	}
	return vllm.Hash(b)
}

// BytesHash is a bytes engine hash (newer vLLM).
func BytesHash(b []byte) vllm.Hash { return vllm.Hash("b" + string(b)) }
