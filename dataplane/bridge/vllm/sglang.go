package vllm

// SGLang publishes the same KV events as vLLM, through a copy of vLLM's
// publisher (the bridge drives its HTTP API as sglang_api.go says, and
// reads its scheduler metrics as metrics.go does): ZmqEventPublisher in
// python/sglang/srt/disaggregation/kv_events.py
// (sgl-project/sglang at 006d053f182f9b488d2bd841afa06d5f9120a258 and
// 612d579090db24ec7c47cc5ca6b83e0c649b8c28), enabled by the server's
// --kv-events-config JSON ({"publisher": "zmq", "endpoint": "tcp://*:5557",
// "replay_endpoint": "tcp://*:5558", "topic": ""}; SGLang has no
// enable_kv_cache_events key, the flag alone turns events on). What is the
// same, and what the bridge does about what is not:
//
//   - Frames: | topic | seq (8B BE) | KVEventBatch |, as vLLM. The replay
//     ROUTER answers | seq | payload | per batch and | -1 | (empty) | at the
//     end, the two-frame reply fetchReplay reads. Rank r of a DP-attention
//     server publishes on the endpoint's port + r (offset_endpoint_port), as
//     --dp-ranks expects.
//   - Batch: always positional (EventBatch is array_like): [ts, events] at
//     006d053, [ts, events, attn_dp_rank] from 612d579 on; the rank sits
//     where vLLM's data_parallel_rank does.
//   - Events: tags BlockStored, BlockRemoved, AllBlocksCleared. Positional
//     BlockStored is | block_hashes | parent_block_hash | token_ids |
//     block_size | lora_id | (vLLM's first five fields), with | medium |
//     sixth in later versions; BlockRemoved is | block_hashes | (| medium |).
//     A later kv_events.py (read in the index without a commit to pin; see
//     the sglang_*.hex vectors) adds BlockStoredWithMetadata, the same tag
//     with a trailing | metadata | map {"cache_salt": s} in the seventh
//     place, where vLLM has lora_name; copies of a still later one encode
//     events as tagged maps with cache_salt and session_id keys. Both
//     forms of the salt are read by sglangSalt.
//   - Hashes: signed int64, hash_str_to_int64 of the page's chained SHA-256
//     (mem_cache/radix_cache.py at 006b0e3d317f1cd4a7300e919a4eaa878b1947e7,
//     compute_node_hash_values): negative ones arrive as msgpack int64 and
//     are kept as their 64 bits. The bridge never uses them as kvgate
//     hashes; it rehashes token_ids.
//   - Blocks: RadixCache._record_store_event publishes one BlockStored per
//     page, block_size = page_size tokens (--page-size, 1 by default), the
//     parent being the previous page's hash (None under the root).
//     kvgate-bridge --block-size must equal SGLang's --page-size: an event of
//     another size cannot be rehashed and is skipped (unknown_block; the
//     pages chained to it then count as unknown_parent).
//   - LoRA and salt: SGLang keeps adapters and cache salts apart in the
//     radix tree (RadixKey.extra_key) but publishes lora_id None and no
//     extra keys; only the salt reaches the events, in the later
//     versions above. A salted block is skipped and counted (cache_salt),
//     as vLLM's are; an adapter's block cannot be told from the base
//     model's and is indexed as the base model's.
//   - Medium: "GPU" from the radix cache; the hierarchical cache's tiers
//     are StorageMedium values ("CPU_PINNED", "DISK", "EXTERNAL"), mapped
//     by tierOf ("EXTERNAL" is skipped as an unknown tier).
//   - EAGLE: with bigram keys token_ids holds [token, next] pairs; such an
//     event does not decode and costs only itself.

// sglangSalt returns the cache salt an SGLang BlockStored carries ("" for
// none): a cache_salt field (tagged maps), or a metadata map holding one,
// which the positional encoding puts where vLLM's lora_name goes.
func sglangSalt(fields map[string]any) string {
	if s, ok := fields["cache_salt"].(string); ok {
		return s
	}
	for _, k := range [...]string{"metadata", "lora_name"} {
		if m, ok := fields[k].(map[any]any); ok {
			if s, ok := m["cache_salt"].(string); ok {
				return s
			}
		}
	}
	return ""
}

// markSalted marks every block of a salted SGLang event: SGLang salts the
// whole chain (the radix tree's namespace), not only its first block.
func markSalted(ev *Event) {
	if ev.ExtraKeys == nil {
		ev.ExtraKeys = make([]Extra, len(ev.BlockHashes))
	}
	for i := range ev.ExtraKeys {
		ev.ExtraKeys[i] |= ExtraCacheSalt
	}
}
