// Package tokenize turns prompts into the token ids a model's own Hugging
// Face tokenizer produces, in process, so kvgate hashes exactly the blocks
// the engine will cache. It loads a model's tokenizer.json and
// tokenizer_config.json (LoadDir) or the built-in Qwen3 tokenizer
// (Builtin), and provides:
//
//   - byte-level BPE with the model's normaliser, pre-tokenizer splits and
//     added (special) tokens, checked against Hugging Face's own
//     implementation by golden vectors (testdata/);
//   - the model's chat template (Jinja) and EncodeChat,
//     which caches the tokens of a conversation's long leading segments so
//     later turns only tokenize what is new;
//   - streaming detokenization that never splits a UTF-8 sequence.
//
// Tokenizers other than byte-level BPE are refused by name at load.
package tokenize
