package tokenize

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"sync"
)

// The built-in tokenizer is Qwen3's, compiled into the binary (2 MB
// compressed), so the embedded default runs anywhere without files; see
// builtin/qwen3/NOTICE for its source and licence.
//
//go:embed builtin/qwen3/tokenizer.json.gz builtin/qwen3/tokenizer_config.json
var builtinFS embed.FS

// BuiltinName names the built-in tokenizer in logs and /v1/models.
const BuiltinName = "Qwen/Qwen3 (built in)"

var (
	builtinOnce sync.Once
	builtinTok  *Tokenizer
	builtinErr  error
)

// Builtin returns the built-in tokenizer, loading it on first use.
func Builtin() (*Tokenizer, error) {
	builtinOnce.Do(func() { builtinTok, builtinErr = loadBuiltin() })
	return builtinTok, builtinErr
}

func loadBuiltin() (*Tokenizer, error) {
	tj, cj, err := BuiltinFiles()
	if err != nil {
		return nil, err
	}
	return New(tj, cj)
}

// BuiltinFiles returns the built-in tokenizer's tokenizer.json and
// tokenizer_config.json as Hugging Face ships them, for tools that hand the
// same tokenizer to an engine (perf/gguf writes it into llama.cpp models).
func BuiltinFiles() (tokenizerJSON, configJSON []byte, err error) {
	gz, err := builtinFS.ReadFile("builtin/qwen3/tokenizer.json.gz")
	if err != nil {
		return nil, nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, nil, fmt.Errorf("tokenize: built-in tokenizer: %w", err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		return nil, nil, fmt.Errorf("tokenize: built-in tokenizer: %w", err)
	}
	cj, err := builtinFS.ReadFile("builtin/qwen3/tokenizer_config.json")
	if err != nil {
		return nil, nil, err
	}
	return tj, cj, nil
}

// Open loads the tokenizer in dir (LoadDir), or the built-in one when dir
// is "" (a command's default); name is what logs call it.
func Open(dir string) (tok *Tokenizer, name string, err error) {
	if dir == "" {
		tok, err = Builtin()
		return tok, BuiltinName, err
	}
	tok, err = LoadDir(dir)
	return tok, dir, err
}
