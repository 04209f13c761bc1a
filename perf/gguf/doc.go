// Package gguf writes small Llama-architecture models with random weights as
// GGUF files, with the tokenizer of a Hugging Face tokenizer.json, so that a
// real llama.cpp server can stand in for an inference engine in tests and
// benchmarks without downloading any weights. llama.cpp then tokenizes as
// kvgate does (same vocabulary, merges, pre-tokenizer and added tokens) and
// its scheduler, KV cache and prompt cache behave as with a trained model;
// only the text it generates is noise.
//
// # File layout
//
// GGUF version 3, little endian, as ggml/include/gguf.h and
// gguf-py/gguf/constants.py of llama.cpp describe it (read at commit
// 80fb11ac73e66d89eae2c6a91d8a77428fa733ed, the source node-llama-cpp
// 3.21.1 bundles):
//
//	| "GGUF" (4B) | version u32 = 3 | tensor count u64 | KV count u64 |
//	| KV pairs ...                                                  |
//	| tensor infos ...                                              |
//	| padding to 32 | tensor data, each tensor padded to 32 ...     |
//
//	string: | length u64 | bytes (no NUL) |
//	KV:     | key string | type u32 | value |   array value: | elem type u32 | count u64 | elems |
//	tensor: | name string | n_dims u32 | ne[0] ... ne[n-1] u64 | ggml type u32 | offset u64 |
//
// ne[0] is the innermost (contiguous) dimension, so a weight applied as
// y = W x with x of size in and y of size out has ne = {in, out}. Offsets
// count from the start of the data section and are multiples of the
// alignment (general.alignment, 32, llama.cpp's default, written explicitly).
//
// # Metadata
//
// general.architecture "llama", general.name, general.alignment,
// general.file_type (0 all F32, 1 mostly F16); llama.vocab_size,
// context_length, embedding_length, block_count, feed_forward_length,
// attention.head_count, attention.head_count_kv,
// attention.layer_norm_rms_epsilon, rope.dimension_count, rope.freq_base
// (src/llama-model.cpp, llama_model_base::load_hparams and
// src/models/llama.cpp). Tokenizer: tokenizer.ggml.model "gpt2" (byte-level
// BPE), tokenizer.ggml.pre (the pre-tokenizer by name: "qwen2" for the
// Qwen2/2.5/3 split regex, chosen from tokenizer.json's own regex),
// tokenizer.ggml.tokens, tokenizer.ggml.token_type, tokenizer.ggml.merges,
// bos/eos/padding ids, add_bos_token and add_eos_token, and
// tokenizer.chat_template (src/llama-vocab.cpp, llama_vocab::impl::load).
//
// # Tensors
//
// token_embd {n_embd, n_vocab}, output_norm {n_embd}, output {n_embd,
// n_vocab} (left out when Shape.TiedOutput: llama.cpp then reuses
// token_embd), and per block i: blk.i.attn_norm {n_embd}, blk.i.attn_q
// {n_embd, n_embd}, blk.i.attn_k and blk.i.attn_v {n_embd, n_kv_head *
// head_dim}, blk.i.attn_output {n_embd, n_embd}, blk.i.ffn_norm {n_embd},
// blk.i.ffn_gate and blk.i.ffn_up {n_embd, n_ff}, blk.i.ffn_down {n_ff,
// n_embd}, each with the suffix ".weight" (names from
// gguf-py/gguf/constants.py TENSOR_NAMES, shapes from
// llama_model_llama::load_arch_tensors). Matrices are F16 or F32 as
// Options.Type says; norm weights are always F32 ones, as llama.cpp's
// converter keeps 1-D tensors in F32.
//
// # Weights
//
// Matrices are uniform random with a standard deviation of 0.02, from a PCG
// generator seeded with (Options.Seed, the tensor's index), so a seed makes
// one file, byte for byte. attn_output and ffn_down are 50 times smaller:
// the blocks run in full but barely move the residual stream, which makes
// greedy decoding a function of the input with margins that llama.cpp's
// rounding differences (a batched prefill against a cached prompt's
// single-token step) cannot flip. Unless Options.GenerateAll, an anchor
// dimension in the embeddings and the output matrix keep generation on
// normal tokens that are whole UTF-8 (see weights.go).
//
// # Token list
//
// Ids follow tokenizer.json: model.vocab entries are NORMAL tokens, spelled
// as tokenizer.json spells them (byte-level, "Ġ" for a space); added tokens
// are CONTROL when special or when they look special ("<|...|>"), otherwise
// USER_DEFINED, spelled as their content; ids no entry names are filled with
// "[PAD<id>]" as UNUSED, which is what llama.cpp's converter does
// (conversion/base.py, get_vocab_base). llama.cpp matches CONTROL and
// USER_DEFINED tokens whole in text when asked to parse special tokens, as
// kvgate's tokenizer matches every added token.
//
// Known differences that no metadata can remove: llama.cpp's byte-level BPE
// applies no normalizer, so a tokenizer.json with one (Qwen3's NFC) can
// tokenize text that is not in NFC differently; and llama.cpp makes any
// token spelled "</s>" a control token (its end-of-generation detection by
// spelling), which it then matches whole in text where Hugging Face's BPE
// splits it. The e2e test perf/e2e/llamacpp_test.go checks the project's
// corpus and lists what differs.
package gguf
