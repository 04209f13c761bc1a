package llamacpp

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/kvstore"
	"github.com/kvgate/kvgate/perf/gguf"
	llamaserver "github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// checkFor calls f every interval until it returns nil, and fails the test
// with f's last error once timeout has passed: the package's one way to
// wait for what the relays, the poll loop and llama-server do on their own.
// Tests wait for a condition, they never time one, so timeouts are
// generous (CI is a loaded 2-core machine).
func checkFor(t testing.TB, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(interval) // the poll interval
	}
}

// testModel is the name the real servers answer to (--alias).
const testModel = "kvgate/test-llama"

var (
	modelOnce sync.Once
	modelPath string
	modelErr  error
)

// realServer starts llama-server with parallel slots of slotCtx tokens,
// serving the shared random-weight model (gguf.Defaults, kvgate's Qwen3
// tokenizer) as testModel; the test skips without a llama-server binary
// unless $KVGATE_REQUIRE_LLAMA is set.
func realServer(t testing.TB, parallel, slotCtx int, args ...string) *llamaserver.Server {
	t.Helper()
	bin := llamacpptest.Binary(t)
	modelOnce.Do(func() {
		modelPath = filepath.Join(modelDir, "model.gguf")
		_, modelErr = gguf.WriteFile(modelPath, gguf.Defaults())
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return llamacpptest.Start(t, llamaserver.Config{Binary: bin, Model: modelPath, Parallel: parallel, CtxSize: parallel * slotCtx,
		Args: append([]string{"--alias", testModel}, args...)})
}

// builtin is kvgate's built-in tokenizer.
func builtin(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var (
	piecesOnce sync.Once
	pieces     *Pieces
)

// builtinPieces indexes the built-in tokenizer once for all tests.
func builtinPieces(t testing.TB) *Pieces {
	tok := builtin(t)
	piecesOnce.Do(func() { pieces = NewPieces(tok) })
	return pieces
}

// hasher hashes blocks of bs tokens for testModel.
func hasher(t testing.TB, bs int) *kvstore.Hasher {
	t.Helper()
	h, err := kvstore.NewHasher(kvstore.HashConfig{BlockSize: bs, Model: testModel})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var quiet = slog.New(slog.DiscardHandler)
