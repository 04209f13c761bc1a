// Package llamacpptest starts llama.cpp's llama-server for tests, in the
// manner of net/http/httptest: one call gives a ready server on a loopback
// port, serving a random-weight model written into the test's temporary
// directory, stopped when the test ends.
//
// Where no llama-server binary is found, tests skip, saying how to build
// one, unless $KVGATE_REQUIRE_LLAMA is set (CI sets it to 1): then they
// fail, so a broken build cannot pass as a skipped test.
package llamacpptest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvgate/kvgate/perf/gguf"
	"github.com/kvgate/kvgate/perf/llamacpp"
)

// EnvRequire names the environment variable that turns a missing
// llama-server from a skip into a failure.
const EnvRequire = "KVGATE_REQUIRE_LLAMA"

// Binary returns the llama-server to run (llamacpp.FindBinary), or skips
// the test (fails it when $KVGATE_REQUIRE_LLAMA is set) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := llamacpp.FindBinary()
	if err == nil {
		return p
	}
	if os.Getenv(EnvRequire) != "" {
		t.Fatalf("%v ($%s is set, so this fails instead of skipping)", err, EnvRequire)
	}
	t.Skipf("%v; set $%s=1 to fail instead of skipping", err, EnvRequire)
	return ""
}

// Model writes the model o describes into the test's temporary directory
// and returns its path. Write it once and pass it to several servers.
func Model(t testing.TB, o gguf.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	if _, err := gguf.WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// Start runs llama-server with c and returns it ready; it is closed when
// the test ends, and its output is logged if the test failed. An empty
// c.Binary is Binary(t); an empty c.Model is Model(t, gguf.Defaults()).
func Start(t testing.TB, c llamacpp.Config) *llamacpp.Server {
	t.Helper()
	if c.Binary == "" {
		c.Binary = Binary(t)
	}
	if c.Model == "" {
		c.Model = Model(t, gguf.Defaults())
	}
	s, err := llamacpp.Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing llama-server: %v", err)
		}
		if t.Failed() {
			t.Logf("llama-server %s output (last 64 KiB):\n%s", s.URL, s.Log())
		}
	})
	return s
}
