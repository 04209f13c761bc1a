// Package tokenize turns prompts into the token ids a model's own Hugging
// Face tokenizer produces, in process, so kvgate hashes exactly the blocks
// the engine will cache. It loads a model's tokenizer.json,
// tokenizer_config.json and chat_template.jinja (LoadDir) or the built-in
// Qwen3 tokenizer (Builtin), and provides:
//
//   - BPE in both of the forms models ship: byte-level (Qwen2/2.5/3,
//     Llama 3, gpt-oss, DeepSeek V3: the model's normaliser, pre-tokenizer
//     splits with their lookahead patterns written out by hand, and
//     ignore_merges) and
//     SentencePiece style (Llama 2, Mistral, Gemma: characters with
//     byte_fallback and fused unknowns, the Prepend, Replace and
//     Precompiled (SentencePiece charsmap) normalisers, Metaspace, literal
//     Split), with added (special) tokens,
//     checked against Hugging Face's own implementation by golden vectors
//     (testdata/) and, on the full files, by perf/e2e;
//   - SentencePiece's Unigram model (T5, XLM-R style: Viterbi over the
//     pieces' scores, fused unknowns, byte_fallback);
//   - decoding by the model's decoder (ByteLevel, or Replace, ByteFallback,
//     Fuse, Strip and Metaspace in sequence);
//   - the model's chat template (Jinja, with transformers' strftime_now)
//     and EncodeChat,
//     which caches the tokens of a conversation's long leading segments so
//     later turns only tokenize what is new;
//   - streaming detokenization that never splits a UTF-8 sequence.
//
// Anything else (WordPiece and WordLevel models, Regex patterns
// in Replace, lookahead patterns in Split other than the GPT-4 family's,
// o200k's and DeepSeek V3's, BERT-style
// components) is refused by name at load.
package tokenize
