package gguf

import (
	"fmt"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// BuiltinTokenizer returns the files of kvgate's built-in Qwen3 tokenizer,
// the one kvgate uses without --tokenizer.
func BuiltinTokenizer() (TokenizerFiles, error) {
	tj, cj, err := tokenize.BuiltinFiles()
	if err != nil {
		return TokenizerFiles{}, fmt.Errorf("%w: %v", ErrNoBuiltinTokenizer, err)
	}
	return TokenizerFiles{JSON: tj, Config: cj}, nil
}
