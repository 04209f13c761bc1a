// Package routers starts kvgate routers as real processes on loopback for
// benchmarks: one or several replicas in front of given engines (wire
// protocol engines, HTTP engines or both), joined in a replica ring or not,
// each waited for until it is ready.
package routers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Sync is how replicas share their load.
type Sync string

const (
	// SyncNone: each replica routes alone.
	SyncNone Sync = "none"
	// SyncRounds: ring all-reduce rounds only.
	SyncRounds Sync = "rounds"
	// SyncBroadcast: rounds plus each reservation broadcast at once.
	SyncBroadcast Sync = "broadcast"
)

// ParseSync reads a Sync.
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case SyncNone, SyncRounds, SyncBroadcast:
		return Sync(s), nil
	}
	return "", fmt.Errorf("--sync %q: none, rounds or broadcast", s)
}

// Options describe the routers to start.
type Options struct {
	// Binary is the kvgate executable.
	Binary string
	Policy string
	// Engines are wire-protocol engines (kvgate --engine), HTTPEngines
	// OpenAI-compatible ones (--http-engine); at least one of the two.
	Engines     []string
	HTTPEngines []string
	// Replicas is how many routers; Sync and SyncInterval join them.
	Replicas     int
	Sync         Sync
	SyncInterval time.Duration
	// ReadyTimeout bounds the wait for each router's /ready.
	ReadyTimeout time.Duration
}

// Routers are running kvgate processes.
type Routers struct {
	// Bases are the routers' base URLs, in start order.
	Bases []string
	// Admins are their admin listeners' base URLs (/metrics,
	// /debug/state), in the same order.
	Admins []string
	cmds   []*exec.Cmd
}

// Start starts o.Replicas routers and waits until each is ready.
func Start(ctx context.Context, o Options) (*Routers, error) {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	ringAddrs, err := FreeAddrs(o.Replicas)
	if err != nil {
		return nil, err
	}
	rs := &Routers{}
	for i := range o.Replicas {
		args := []string{"--policy", o.Policy, "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--max-inflight", "0", "--max-model-len", "1000000"}
		if len(o.Engines) > 0 {
			args = append(args, "--engine", strings.Join(o.Engines, ","))
		}
		if len(o.HTTPEngines) > 0 {
			args = append(args, "--http-engine", strings.Join(o.HTTPEngines, ","))
		}
		if o.Replicas > 1 && o.Sync != SyncNone {
			args = append(args, "--replica-id", fmt.Sprintf("replica-%d", i), "--ring-listen", ringAddrs[i],
				"--peers", strings.Join(ringAddrs, ","), "--sync-interval", o.SyncInterval.String(),
				fmt.Sprintf("--ring-broadcast=%v", o.Sync == SyncBroadcast))
		}
		base, admin, err := rs.start(ctx, o, args)
		if err != nil {
			rs.Stop()
			return nil, err
		}
		rs.Bases, rs.Admins = append(rs.Bases, base), append(rs.Admins, admin)
	}
	return rs, nil
}

func (rs *Routers) start(ctx context.Context, o Options, args []string) (base, admin string, err error) {
	cmd := exec.CommandContext(ctx, o.Binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", "", err
	}
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	rs.cmds = append(rs.cmds, cmd)
	if base, admin, err = waitListening(stderr); err != nil {
		return "", "", err
	}
	return base, admin, waitReady(ctx, base, o.ReadyTimeout)
}

// Pids are the routers' process ids, in start order.
func (rs *Routers) Pids() []int {
	pids := make([]int, len(rs.cmds))
	for i, c := range rs.cmds {
		pids[i] = c.Process.Pid
	}
	return pids
}

// Stop sends SIGTERM to every router and waits for them to exit.
func (rs *Routers) Stop() {
	for _, c := range rs.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range rs.cmds {
		_ = c.Wait()
	}
	rs.cmds = nil
}

// waitListening reads kvgate's JSON log until its "kvgate listening" line,
// then keeps draining the log in the background. It returns the public and
// the admin base URLs.
func waitListening(r io.Reader) (base, admin string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != "kvgate listening" {
			continue
		}
		go func() { _, _ = io.Copy(io.Discard, r) }()
		return "http://" + fmt.Sprint(m["addr"]), "http://" + fmt.Sprint(m["admin"]), nil
	}
	return "", "", errors.New("kvgate exited before listening")
}

// waitReady polls /ready until it answers 200.
func waitReady(ctx context.Context, base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if r, err := http.Get(base + "/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	return errors.New("kvgate never became ready")
}

// FreeAddrs finds n free loopback ports, for listeners that must be known
// before their processes start (replicas list each other as peers).
func FreeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns, out = append(lns, ln), append(out, ln.Addr().String())
	}
	return out, nil
}

// FindKvgate returns explicit when set, else a kvgate binary beside the
// running executable, else one on PATH.
func FindKvgate(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "kvgate"); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("kvgate"); err == nil {
		return p, nil
	}
	return "", errors.New("no kvgate binary: build it (make build) or pass --kvgate")
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
