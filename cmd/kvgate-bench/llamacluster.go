package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kvgate/kvgate/perf/gguf"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/routers"
)

// llamaFlags say what cluster of llama.cpp servers the llamacpp command
// starts: each a llama-server with a kvgate-bridge --engine-kind llamacpp
// in front.
type llamaFlags struct {
	servers, threads, parallel, slotCtx, cacheRAM int
	size, llamaServer, bridge, dir                string
}

func (f *llamaFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.servers, "servers", 4, "llama-server processes, each behind its own kvgate-bridge")
	fs.StringVar(&f.size, "size", "small", "model written with perf/gguf: small (about 40 M parameters) or qwen2.5-0.5b (494 M)")
	fs.IntVar(&f.threads, "threads", 1, "llama-server --threads of each server")
	fs.IntVar(&f.parallel, "parallel", 4, "llama-server --parallel: slots per server, each caching one prompt")
	fs.IntVar(&f.slotCtx, "slot-ctx", 2048, "context of each slot in tokens (--ctx-size is --parallel times this)")
	fs.IntVar(&f.cacheRAM, "cache-ram", 0, "llama-server --cache-ram in MiB; 0 turns off the host-memory prompt cache, which erasing slots does not clear, so that the flush between policies is complete")
	fs.StringVar(&f.llamaServer, "llama-server", "", "llama-server binary (default $"+llamacpp.EnvBinary+", then make llama-server's cache)")
	fs.StringVar(&f.bridge, "bridge", "", "kvgate-bridge binary (default: next to kvgate-bench, then $PATH)")
	fs.StringVar(&f.dir, "dir", "", "directory for the model, the servers' slot files and the logs (default: a temporary one, removed at the end)")
}

func (f *llamaFlags) shape() (gguf.Shape, error) {
	switch f.size {
	case "small":
		return gguf.Small(), nil
	case "qwen2.5-0.5b":
		return gguf.Qwen25HalfB(), nil
	}
	return gguf.Shape{}, fmt.Errorf("--size %q: small or qwen2.5-0.5b", f.size)
}

func (f *llamaFlags) record(flags map[string]any) {
	flags["servers"], flags["size"], flags["threads"], flags["parallel"] = f.servers, f.size, f.threads, f.parallel
	flags["slot_ctx"], flags["cache_ram"] = f.slotCtx, f.cacheRAM
}

// cmdLlamaCpp writes a random-weight model, starts --servers llama.cpp
// servers and a kvgate-bridge in front of each, and runs compare against
// them: kvgate per policy, every slot erased before each policy, the hit
// rate from the servers' own counters.
func cmdLlamaCpp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llamacpp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var l loadFlags
	l.register(fs)
	model := gguf.Defaults().Name
	fs.Lookup("model").DefValue, l.model = model, model
	var c compareFlags
	c.register(fs, false)
	c.policies = "kv,round-robin,least-load"
	fs.Lookup("policies").DefValue = c.policies
	var f llamaFlags
	f.register(fs)
	wl, err := l.parse(fs, args)
	if err != nil {
		return err
	}
	if err := c.rf.check(); err != nil {
		return err
	}
	shape, err := f.shape()
	if err != nil {
		return err
	}
	if f.servers < 1 || f.parallel < 1 || f.threads < 1 || f.slotCtx < 64 {
		return errors.New("--servers, --parallel and --threads must be at least 1, --slot-ctx at least 64")
	}
	bin, err := routers.FindKvgate(c.kvgateBin)
	if err != nil {
		return err
	}
	bridgeBin, err := findBeside(f.bridge, "kvgate-bridge")
	if err != nil {
		return err
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "kvgate-llamacpp-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	cl, err := startLlamaCluster(ctx, &f, shape, l.model, bridgeBin, dir, stderr)
	if cl != nil {
		defer cl.stop(stderr)
	}
	if err != nil {
		return err
	}
	c.ext = externalFlags{engineAddrs: cl.bridges, llamacpp: cl.urls, settle: 30 * time.Second, enginePids: cl.pids()}
	wl.Denser(c.load)
	c.extra = map[string]any{}
	f.record(c.extra)
	return compareExternal(ctx, &l, &c, bin, wl, stdout, stderr)
}

// llamaCluster is the servers and bridges cmdLlamaCpp started.
type llamaCluster struct {
	servers []*llamacpp.Server
	bridges []string // the bridges' wire-protocol addresses
	urls    []string // the servers' base URLs
	cmds    []*exec.Cmd
	exited  []chan struct{} // closed when the bridge of cmds[i] has exited
	closers []io.Closer
}

func startLlamaCluster(ctx context.Context, f *llamaFlags, shape gguf.Shape, model, bridgeBin, dir string, progress io.Writer) (*llamaCluster, error) {
	o := gguf.Defaults()
	o.Shape, o.Name = shape, model
	path := filepath.Join(dir, "model.gguf")
	t := time.Now()
	info, err := gguf.WriteFile(path, o)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "model: %s, %d parameters (%.0f MB), random weights, kvgate's tokenizer, written in %.1f s\n",
		f.size, info.Params, float64(info.Bytes)/1e6, time.Since(t).Seconds())
	slotDir := filepath.Join(dir, "slots")
	if err := os.MkdirAll(slotDir, 0o755); err != nil {
		return nil, err
	}
	cl := &llamaCluster{}
	for i := range f.servers {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("llama-server-%d.log", i)))
		if err != nil {
			return cl, err
		}
		s, err := llamacpp.Start(ctx, llamacpp.Config{Binary: f.llamaServer, Model: path, CtxSize: f.parallel * f.slotCtx,
			Parallel: f.parallel, Threads: f.threads, Log: logf, Args: []string{"--alias", model,
				"--cache-ram", strconv.Itoa(f.cacheRAM), "--slot-save-path", slotDir}})
		if err != nil {
			logf.Close()
			return cl, fmt.Errorf("llama-server %d: %w", i, err)
		}
		cl.servers, cl.urls, cl.closers = append(cl.servers, s), append(cl.urls, s.URL), append(cl.closers, logf)
		fmt.Fprintf(progress, "llama-server %d at %s: --threads %d --parallel %d --ctx-size %d --cache-ram %d\n",
			i, s.URL, f.threads, f.parallel, f.parallel*f.slotCtx, f.cacheRAM)
	}
	for i, s := range cl.servers {
		addr, err := cl.startBridge(ctx, bridgeBin, s.URL, model, fmt.Sprintf("llama-%d", i), filepath.Join(dir, fmt.Sprintf("bridge-%d.log", i)))
		if err != nil {
			return cl, fmt.Errorf("kvgate-bridge %d: %w", i, err)
		}
		cl.bridges = append(cl.bridges, addr)
		fmt.Fprintf(progress, "kvgate-bridge --engine-kind llamacpp %d at %s -> %s\n", i, addr, s.URL)
	}
	return cl, nil
}

// startBridge runs a bridge in front of url and returns its wire-protocol
// address once its "bridge serving" line is logged, its log going on to
// logPath.
func (cl *llamaCluster) startBridge(ctx context.Context, bin, url, model, id, logPath string) (string, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "--engine-kind", "llamacpp", "--engine-url", url, "--model", model, "--id", id,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--block-size", "16", "--drain-timeout", "2s",
		"--connect-timeout", "1m")
	// The log goes to its file through exec's own copy, which Wait waits
	// for; the pipe only lets the address be read from it, and is read to
	// its end so the bridge never blocks on a full pipe.
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(logf, pw)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", err
	}
	cl.cmds = append(cl.cmds, cmd)
	cl.closers = append(cl.closers, pw, logf)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "bridge serving" {
				found <- fmt.Sprint(m["addr"])
			}
		}
		_, _ = io.Copy(io.Discard, pr) // a line too long for the scanner
		close(found)
	}()
	exited := make(chan struct{})
	go func() { // a bridge that exits before serving ends the wait
		_ = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	cl.exited = append(cl.exited, exited)
	select {
	case addr, ok := <-found:
		if !ok {
			return "", fmt.Errorf("exited before serving; its log: %s", logPath)
		}
		return addr, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// pids are the servers' and the bridges' process ids.
func (cl *llamaCluster) pids() []int {
	var pids []int
	for _, s := range cl.servers {
		pids = append(pids, s.Pid())
	}
	for _, c := range cl.cmds {
		pids = append(pids, c.Process.Pid)
	}
	return pids
}

// stop ends the bridges (SIGTERM), then the servers, then closes their logs.
func (cl *llamaCluster) stop(log io.Writer) {
	for _, c := range cl.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, e := range cl.exited {
		<-e
	}
	for _, s := range cl.servers {
		if err := s.Close(); err != nil {
			fmt.Fprintln(log, "closing llama-server:", err)
		}
	}
	for _, c := range cl.closers {
		_ = c.Close()
	}
}

// findBeside returns explicit when set, else the named binary beside the
// running executable, else one on PATH.
func findBeside(explicit, name string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), name); isFile(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no %s binary: build it (make build) or pass its path", name)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
