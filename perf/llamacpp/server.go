// Package llamacpp runs llama.cpp's llama-server as a child process on a
// loopback port: the real engine kvgate's tests and benchmarks are measured
// against. `make llama-server` builds the binary (from the llama.cpp source
// that the npm package node-llama-cpp bundles, see
// perf/scripts/build-llama-server.sh) and perf/gguf writes the models it
// serves. llamacpptest wraps Start for tests.
//
// A Server is owned by the goroutine that started it: Close and Kill may be
// called from any goroutine, once each or more (later calls wait for the
// first), and Done is closed when the process has exited and been reaped.
package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NodeLlamaCppVersion is the node-llama-cpp release whose bundled llama.cpp
// `make llama-server` builds; the Makefile's LLAMA_VERSION says the same.
const NodeLlamaCppVersion = "3.21.1"

// EnvBinary names the environment variable that points at a llama-server
// binary; `make test` sets it to the one it built.
const EnvBinary = "KVGATE_LLAMA_SERVER"

// Errors of the package.
var (
	// ErrNoBinary is returned when no llama-server binary is found.
	ErrNoBinary = errors.New("llamacpp: llama-server binary not found")
	// ErrExited is returned when llama-server exits before it is ready.
	ErrExited = errors.New("llamacpp: llama-server exited before it was ready")
	// ErrNotReady is returned when llama-server is not healthy in time.
	ErrNotReady = errors.New("llamacpp: llama-server not ready in time")
)

// DefaultBinary is where `make llama-server` puts the binary when its
// LLAMA_CACHE is left alone: $HOME/.cache/kvgate/llama.cpp-<version>.
// It is $HOME/.cache whatever XDG_CACHE_HOME says, as in the Makefile.
func DefaultBinary() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "kvgate", "llama.cpp-"+NodeLlamaCppVersion, "bin", "llama-server")
}

// FindBinary returns the llama-server to run: $KVGATE_LLAMA_SERVER when
// set (it must exist), else DefaultBinary when it exists.
func FindBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: $%s=%s: %v", ErrNoBinary, EnvBinary, p, err)
		}
		return p, nil
	}
	p := DefaultBinary()
	if _, err := os.Stat(p); p == "" || err != nil {
		return "", fmt.Errorf("%w: $%s is unset and %s is missing (run make llama-server)", ErrNoBinary, EnvBinary, p)
	}
	return p, nil
}

// Config says how to run llama-server. The zero value of each field picks
// the default its comment names.
type Config struct {
	// Binary is llama-server's path; "" means FindBinary.
	Binary string
	// Model is the GGUF file to serve (required).
	Model string
	// CtxSize is the context of all slots together (--ctx-size; 8192).
	CtxSize int
	// Parallel is the number of slots (--parallel; 1).
	Parallel int
	// Threads is the number of CPU threads (--threads; 1). One is the
	// default because ggml's threads wait for each other spinning: on a
	// 2-core machine shared with other work, 2 threads prefilled 350-440
	// tokens/s where 1 thread did 3,000-3,500 (the small perf/gguf model,
	// 1,000-token prompts); on an idle machine 2 threads are faster.
	Threads int
	// Args are further llama-server flags, appended last.
	Args []string
	// Log receives llama-server's output as it comes; the last part is
	// kept either way for errors and Server.Log.
	Log io.Writer
	// ReadyTimeout bounds the wait for /health (60 s).
	ReadyTimeout time.Duration
	// BindAttempts is how many free ports are tried when the one picked is
	// taken before llama-server binds it (5).
	BindAttempts int
}

func (c *Config) defaults() {
	if c.CtxSize == 0 {
		c.CtxSize = 8192
	}
	if c.Parallel == 0 {
		c.Parallel = 1
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 60 * time.Second
	}
	if c.BindAttempts == 0 {
		c.BindAttempts = 5
	}
}

// Args returns the command line Start runs for port, binary excluded.
func (c Config) args(port int) []string {
	args := []string{
		"--model", c.Model,
		"--host", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--ctx-size", strconv.Itoa(c.CtxSize),
		"--parallel", strconv.Itoa(c.Parallel),
		"--threads", strconv.Itoa(c.Threads),
		"--no-webui",
		"--metrics",
		"--slots",
		"--no-warmup",
	}
	return append(args, c.Args...)
}

// Server is a running llama-server.
type Server struct {
	// URL is its base address, http://127.0.0.1:PORT.
	URL string
	// Addr is its host:port.
	Addr string

	cmd       *exec.Cmd
	log       *tail
	done      chan struct{}
	waitErr   error // set before done is closed
	closeOnce sync.Once
	closeErr  error
}

// Start runs llama-server on a free loopback port and returns once its
// /health answers 200, the model loaded. A port taken between being picked
// and being bound is retried on another. ctx bounds the start only; the
// server runs until Close or Kill.
func Start(ctx context.Context, c Config) (*Server, error) {
	c.defaults()
	if c.Model == "" {
		return nil, errors.New("llamacpp: Config.Model is empty")
	}
	if c.Binary == "" {
		var err error
		if c.Binary, err = FindBinary(); err != nil {
			return nil, err
		}
	}
	var err error
	for range c.BindAttempts {
		var s *Server
		if s, err = start(ctx, c); err == nil {
			return s, nil
		}
		if !errors.Is(err, errBind) {
			return nil, err
		}
	}
	return nil, err
}

// errBind marks a start that failed because the port was taken.
var errBind = errors.New("llamacpp: port taken")

func start(ctx context.Context, c Config) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("picking a port: %w", err)
	}
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		log:  &tail{max: 64 << 10},
		done: make(chan struct{}),
	}
	s.URL = "http://" + s.Addr
	s.cmd = exec.Command(c.Binary, c.args(port)...)
	var out io.Writer = s.log
	if c.Log != nil {
		out = io.MultiWriter(s.log, c.Log)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.Env = environ()
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting llama-server: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx, c.ReadyTimeout); err != nil {
		_ = s.Kill()
		if strings.Contains(s.log.String(), "couldn't bind HTTP server socket") {
			return nil, errBind
		}
		return nil, fmt.Errorf("%w\n%s", err, s.log.String())
	}
	return s, nil
}

// waitReady polls /health until it answers 200, the process exits, ctx
// ends or timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("%w: %v", ErrExited, s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrNotReady, ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops the server with SIGTERM, then SIGKILL if it has not exited
// after 10 seconds, and waits for it. It returns nil when the process ended
// on the signal.
func (s *Server) Close() error { return s.stop(syscall.SIGTERM, 10*time.Second) }

// Kill stops the server with SIGKILL at once (a crash, for failure tests)
// and waits for it.
func (s *Server) Kill() error { return s.stop(syscall.SIGKILL, 0) }

func (s *Server) stop(sig syscall.Signal, grace time.Duration) error {
	s.closeOnce.Do(func() {
		_ = s.cmd.Process.Signal(sig)
		select {
		case <-s.done:
		case <-time.After(grace):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		var exit *exec.ExitError
		if s.waitErr != nil && !(errors.As(s.waitErr, &exit) && (exit.ExitCode() == 0 || signaled(exit))) {
			s.closeErr = fmt.Errorf("llamacpp: llama-server: %w", s.waitErr)
		}
	})
	<-s.done
	return s.closeErr
}

// Done is closed once the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Pid is the process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Log returns the last 64 KiB of llama-server's output.
func (s *Server) Log() string { return s.log.String() }

func signaled(e *exec.ExitError) bool {
	ws, ok := e.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// environ is the process environment without llama-server's LLAMA_ARG_*
// variables, which would override the flags Start passes.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLAMA_ARG_") {
			env = append(env, kv)
		}
	}
	return env
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
