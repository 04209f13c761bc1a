// Package llamacpp speaks what llama.cpp's llama-server speaks, for
// kvgate-bridge --engine-kind llamacpp: its native completion endpoint
// with token-id prompts and token-id streams, its /slots, /metrics, /props,
// /v1/models and /tokenize. Everything is read as llama.cpp writes it at
// commit 80fb11ac73e66d89eae2c6a91d8a77428fa733ed, the source that the npm
// package node-llama-cpp 3.21.1 bundles (tools/server/server-context.cpp,
// server-task.cpp, server-schema.cpp, server-common.cpp); testdata holds
// the answers of that build, captured.
//
// # Endpoints and fields
//
//	POST /completion   prompt (ids), n_predict, temperature, top_p, top_k, min_p 0,
//	                   seed, ignore_eos, cache_prompt, stream, return_tokens,
//	                   timings_per_token, response_fields        (engine.go)
//	  events           content, tokens, stop, id_slot, tokens_predicted,
//	                   tokens_evaluated, tokens_cached, stop_type, truncated,
//	                   timings.cache_n, timings.prompt_n; error   (stream.go)
//	GET  /slots        id, n_ctx, is_processing, id_task, n_prompt_tokens,
//	                   n_prompt_tokens_cache, n_prompt_tokens_processed,
//	                   next_token[0].n_decoded                   (slots.go)
//	GET  /metrics      llamacpp:requests_processing, requests_deferred,
//	                   prompt_tokens_total, prompt_tokens_cached_total (metrics.go)
//	GET  /props        total_slots, default_generation_settings.n_ctx,
//	                   model_alias, endpoint_slots, endpoint_metrics,
//	                   eos_token, build_info                      (props.go)
//	GET  /v1/models    data[].id, aliases, owned_by, meta.n_vocab (props.go)
//	POST /tokenize     content, add_special false, parse_special true (probe.go)
//
// A GENERATE field llama.cpp cannot honour is refused by name with the
// stream's ERROR: a LoRA adapter, multimodal items, guided output, KV
// transfer, a cache salt, a priority, a rank but 0, a seed of 32 bits or
// more. Stop token ids, which llama.cpp does not take, are honoured by the
// bridge: the frame ends after the first one, finish reason stop, and the
// request is closed.
//
// # Connecting
//
// Check refuses a server that is not what the flags say, and says what
// differs: not llama.cpp (no /props, or /v1/models owned by "vllm"),
// /slots or /metrics off, another model than --model (not among
// /v1/models' ids and aliases), a tokenizer that disagrees with kvgate's
// (vocabulary smaller, another end-of-sequence token, or any probe string
// tokenized to other ids). Connect retries a server that does not answer
// yet (connection refused, 503 while it loads its model). kvgate-bridge
// accepts no router before Check passes and exits non-zero on a refusal.
//
// # The bridge's KV events, and how exact they are
//
// llama.cpp publishes no KV events and /slots shows no token ids (only
// with LLAMA_SERVER_SLOTS_DEBUG the prompt's text), so Tracker derives the
// events from what the bridge itself sends and receives: a request's
// prompt is STORED when its first token arrives; when its last event names
// the slot (id_slot) and how many tokens the slot caches (tokens_cached),
// the slot holds the prompt and the generated ids up to that count, and
// what the slot held before beyond the common prefix is REMOVED unless
// another slot or request holds it. /slots polls correct what the bridge
// cannot see. The view is exact for requests that go through the bridge,
// with these limits:
//
//   - Lag: the generated part of a running request, and the blocks a
//     request that is not the bridge's put in a slot, appear only when it
//     ends (or never); a slot's old blocks leave at the first poll after a
//     task takes it (--slots-interval), not at the moment it does.
//   - Other clients of the server: the bridge cannot know what their tasks
//     cache. A slot such a task takes keeps the prefix the task reused
//     (n_prompt_tokens_cache) once it is seen started, and nothing when it
//     was not seen started; the routers undercount, never overcount.
//   - Host-memory prompt cache (--cache-ram, on by default): when llama.cpp
//     picks a slot by least recent use, or by prompt similarity keeping
//     under half of it, it saves the slot's prompt to host memory and may
//     load another saved prompt into the slot. The saved prompt is REMOVED
//     (the bridge does not model the host cache, whose eviction it cannot
//     see), so a later request llama.cpp serves from host memory finds
//     fewer cached blocks in the routers' index than llama.cpp uses; and a
//     prompt loaded into a slot for another client's task is not known.
//   - Slot reuse by similarity (--slot-prompt-similarity): llama.cpp, not
//     kvgate, picks the slot; the bridge learns the choice from id_slot at
//     the end and from the polls before that, so its view of which blocks
//     a running request evicted is a poll late.
//   - Ids the stream leaves out (recover.go): generated blocks are indexed
//     only up to the first id the bridge could not recover exactly.
//   - A request cancelled or stopped at a stop token leaves its tokens in
//     an unknown slot: they stay indexed while an orphan and are placed
//     when a poll shows the one idle slot they fit, or dropped after a few
//     seconds.
//   - A context shift (truncated) moves tokens: the slot's content is
//     then unknown and its blocks are dropped.
//   - When /slots fails for seconds (the server restarted or is gone) the
//     bridge tells routers to forget every block (CLEARED).
//
// # Locks and goroutines
//
// Engine's running-request table has its own mutex (bridgeutil.Requests);
// each request's relay lives on its own goroutine. Bridge.mu guards the
// Tracker and the KV_EVENTS sequence; Bridge.Poll is one goroutine.
package llamacpp
