package gguf

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// builtinDir is where kvgate's built-in Qwen3 tokenizer lives, relative to
// the module root (dataplane/tokenize embeds it from there).
const builtinDir = "dataplane/tokenize/builtin/qwen3"

// BuiltinTokenizer returns the files of kvgate's built-in Qwen3 tokenizer,
// the one kvgate uses without --tokenizer. dataplane/tokenize embeds them
// but exports only the parsed tokenizer, so they are read from the source
// tree: beside this package's source file (tests, go run, binaries built
// without -trimpath), else in the module root above the working directory.
func BuiltinTokenizer() (TokenizerFiles, error) {
	var roots []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		roots = append(roots, filepath.Join(filepath.Dir(file), "..", ".."))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				roots = append(roots, d)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, root := range roots {
		dir := filepath.Join(root, builtinDir)
		gz, err := os.ReadFile(filepath.Join(dir, "tokenizer.json.gz"))
		if err != nil {
			continue
		}
		var f TokenizerFiles
		if f.JSON, err = gunzip(gz); err != nil {
			return f, fmt.Errorf("reading built-in tokenizer: %w", err)
		}
		if f.Config, err = os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err != nil {
			return f, fmt.Errorf("reading built-in tokenizer: %w", err)
		}
		return f, nil
	}
	return TokenizerFiles{}, fmt.Errorf("%w: looked for %s under %q", ErrNoBuiltinTokenizer, builtinDir, roots)
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
