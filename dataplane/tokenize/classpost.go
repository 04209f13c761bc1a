package tokenize

import "fmt"

// rebuildsPostProcessor are the transformers tokenizer classes whose
// constructor replaces tokenizer.json's post-processor with one built from
// tokenizer_config.json: LlamaTokenizerFast and GemmaTokenizerFast call
// update_post_processor in __init__ (src/transformers/models/llama/
// tokenization_llama_fast.py at 01ae98a, models/gemma/
// tokenization_gemma_fast.py at 15ea02a). AutoTokenizer loads the fast
// class for the slow name too, as vLLM does, so both names count.
var rebuildsPostProcessor = map[string]bool{
	"LlamaTokenizer": true, "LlamaTokenizerFast": true,
	"GemmaTokenizer": true, "GemmaTokenizerFast": true,
}

// classPostProcessor does what those constructors do: the tokens added
// around a sequence become BOS when add_bos_token (default true) and EOS
// when add_eos_token (default false), whatever tokenizer.json said. So a
// DeepSeek V3 prompt (LlamaTokenizerFast, a ByteLevel post-processor that
// adds nothing) starts with its BOS, as the engine's transformers
// tokenizer makes it, and its block hashes match the engine's.
func (t *Tokenizer) classPostProcessor(c *configJSON) error {
	if !rebuildsPostProcessor[c.TokenizerClass] {
		return nil
	}
	addBOS, addEOS := true, false
	if c.AddBOSToken != nil {
		addBOS = *c.AddBOSToken
	}
	if c.AddEOSToken != nil {
		addEOS = *c.AddEOSToken
	}
	t.prefix, t.suffix = nil, nil
	if addBOS {
		id, err := t.classToken("bos", t.Config.BOS)
		if err != nil {
			return err
		}
		t.prefix = []uint32{id}
	}
	if addEOS {
		id, err := t.classToken("eos", t.Config.EOS)
		if err != nil {
			return err
		}
		t.suffix = []uint32{id}
	}
	return nil
}

// classToken is the id of the config's bos or eos token; transformers
// refuses add_bos_token without a bos_token, and so does kvgate.
func (t *Tokenizer) classToken(which, content string) (uint32, error) {
	if content == "" {
		return 0, fmt.Errorf("%w: tokenizer_config.json: add_%s_token is true but %s_token is not set", ErrInvalid, which, which)
	}
	if a, ok := t.byContent[content]; ok {
		return a.ID, nil
	}
	if id, ok := t.vocab.get(content); ok {
		return id, nil
	}
	return 0, fmt.Errorf("%w: tokenizer_config.json: %s_token %q is not in the vocabulary", ErrInvalid, which, content)
}
