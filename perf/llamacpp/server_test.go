package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as a fake llama-server (run by the tests with
// $LLAMACPP_FAKE set), so Start's port retries, readiness wait and
// shutdown are tested without llama.cpp: the real one is tested end to end
// in perf/e2e.
func TestMain(m *testing.M) {
	if mode := os.Getenv("LLAMACPP_FAKE"); mode != "" {
		os.Exit(fakeServer(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// fakeServer acts as llama-server would in mode: "ok" serves /health (503
// twice, as while loading, then 200) until SIGTERM; "bind" fails to bind
// as llama-server reports it, the first $LLAMACPP_FAKE_BINDFAILS times
// (counted in files under $LLAMACPP_FAKE_DIR); "crash" exits at once.
func fakeServer(mode string, args []string) int {
	port := ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "error: failed to load model")
		return 3
	case "bind":
		dir := os.Getenv("LLAMACPP_FAKE_DIR")
		n, _ := strconv.Atoi(os.Getenv("LLAMACPP_FAKE_BINDFAILS"))
		tries, _ := os.ReadDir(dir)
		if len(tries) < n {
			_ = os.WriteFile(filepath.Join(dir, port), nil, 0o600)
			fmt.Fprintf(os.Stderr, "srv start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: %s\n", port)
			return 1
		}
	}
	var calls atomic.Int32
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"status":"ok"}`)
	})
	fmt.Fprintln(os.Stderr, "main: server is listening on", port)
	fmt.Fprintln(os.Stderr, http.ListenAndServe("127.0.0.1:"+port, nil))
	return 1
}

func fakeConfig(t *testing.T, mode string) Config {
	t.Setenv("LLAMACPP_FAKE", mode)
	return Config{Binary: os.Args[0], Model: "unused.gguf", ReadyTimeout: 20 * time.Second}
}

func TestStartAndClose(t *testing.T) {
	var log strings.Builder // exec.Cmd writes stdout and stderr, one writer, from one goroutine
	c := fakeConfig(t, "ok")
	c.Log = &log
	s, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL + "/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health after Start: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if !strings.Contains(s.Log(), "listening on") || log.String() != s.Log() {
		t.Errorf("log tail %q, Config.Log got %q", s.Log(), log.String())
	}
	if _, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		t.Error("port still open after Close")
	}
}

func TestKill(t *testing.T) {
	s, err := Start(context.Background(), fakeConfig(t, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Errorf("Kill: %v", err)
	}
	<-s.Done()
}

func TestStartRetriesATakenPort(t *testing.T) {
	c := fakeConfig(t, "bind")
	dir := t.TempDir()
	t.Setenv("LLAMACPP_FAKE_DIR", dir)
	t.Setenv("LLAMACPP_FAKE_BINDFAILS", "2")
	s, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if tries, _ := os.ReadDir(dir); len(tries) != 2 {
		t.Errorf("%d failed binds before the start, want 2", len(tries))
	}

	t.Setenv("LLAMACPP_FAKE_DIR", t.TempDir())
	t.Setenv("LLAMACPP_FAKE_BINDFAILS", "9")
	c.BindAttempts = 3
	if _, err := Start(context.Background(), c); !errors.Is(err, errBind) {
		t.Errorf("always taken: %v", err)
	}
}

func TestStartFails(t *testing.T) {
	_, err := Start(context.Background(), fakeConfig(t, "crash"))
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "failed to load model") {
		t.Errorf("crash: %v", err)
	}
	if _, err := Start(context.Background(), Config{Binary: os.Args[0]}); err == nil {
		t.Error("no model: started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, fakeConfig(t, "ok")); !errors.Is(err, ErrNotReady) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestFindBinary(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(EnvBinary, "")
	if _, err := FindBinary(); !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), "make llama-server") {
		t.Errorf("nothing built: %v", err)
	}
	want := filepath.Join(home, ".cache", "kvgate", "llama.cpp-"+NodeLlamaCppVersion, "bin", "llama-server")
	if DefaultBinary() != want {
		t.Errorf("DefaultBinary %s, want %s", DefaultBinary(), want)
	}
	if err := os.MkdirAll(filepath.Dir(want), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(want, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := FindBinary(); p != want || err != nil {
		t.Errorf("built: %s %v", p, err)
	}
	t.Setenv(EnvBinary, filepath.Join(home, "missing"))
	if _, err := FindBinary(); !errors.Is(err, ErrNoBinary) {
		t.Errorf("env names a missing file: %v", err)
	}
	t.Setenv(EnvBinary, want)
	if p, err := FindBinary(); p != want || err != nil {
		t.Errorf("env: %s %v", p, err)
	}
}

func TestArgsAndEnv(t *testing.T) {
	c := Config{Model: "m.gguf", Args: []string{"--seed", "3"}}
	c.defaults()
	args := c.args(4242)
	for _, pair := range [][2]string{{"--port", "4242"}, {"--host", "127.0.0.1"}, {"--ctx-size", "8192"}, {"--parallel", "1"}, {"--model", "m.gguf"}} {
		i := slices.Index(args, pair[0])
		if i < 0 || i+1 >= len(args) || args[i+1] != pair[1] {
			t.Errorf("%s not %s in %q", pair[0], pair[1], args)
		}
	}
	if !slices.Contains(args, "--no-webui") || args[len(args)-2] != "--seed" {
		t.Errorf("args %q", args)
	}
	t.Setenv("LLAMA_ARG_PORT", "1")
	for _, kv := range environ() {
		if strings.HasPrefix(kv, "LLAMA_ARG_") {
			t.Errorf("environ passes %s", kv)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	for _, s := range []string{"abc", "defgh", "ijk"} {
		_, _ = tl.Write([]byte(s))
	}
	if got := tl.String(); got != "defghijk" {
		t.Errorf("tail %q", got)
	}
}
