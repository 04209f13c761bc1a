package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// replicaFlags run several kvgate replicas in front of the same engines,
// synced through the replica ring or not, with the load spread over them.
type replicaFlags struct {
	n, targets int
	sync       string
	interval   time.Duration
}

func (r *replicaFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.n, "replicas", 1, "kvgate replicas in front of the engines; requests go to them in turn")
	fs.StringVar(&r.sync, "sync", "broadcast", "replica sync: none (each routes alone), rounds (ring all-reduce only), broadcast (rounds and reservation broadcast)")
	fs.DurationVar(&r.interval, "sync-interval", 5*time.Millisecond, "ring all-reduce interval")
	fs.IntVar(&r.targets, "target-replicas", 0, "send requests to the first K replicas only (0: all); the others run, hear every engine and join the ring")
}

func (r *replicaFlags) check() error {
	switch r.sync {
	case "none", "rounds", "broadcast":
	default:
		return fmt.Errorf("--sync %q: none, rounds or broadcast", r.sync)
	}
	if r.n < 1 || r.targets < 0 || r.targets > r.n {
		return fmt.Errorf("--replicas %d, --target-replicas %d: at least 1 replica, at most that many targets", r.n, r.targets)
	}
	return nil
}

func (r *replicaFlags) record(flags map[string]any) {
	flags["replicas"], flags["sync"], flags["sync_interval"], flags["target_replicas"] = r.n, r.sync, r.interval.String(), r.targets
}

// startRouters starts the replicas (kvgate processes) and returns their base
// URLs joined by commas (the load generator's multi-target form) and a
// function that stops them.
func (r *replicaFlags) startRouters(ctx context.Context, bin, policy string, engines []string) (string, func(), error) {
	ringAddrs, err := freeAddrs(r.n)
	if err != nil {
		return "", nil, err
	}
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	var bases []string
	for i := range r.n {
		args := []string{"--engine", strings.Join(engines, ","), "--policy", policy, "--listen", "127.0.0.1:0",
			"--admin-listen", "127.0.0.1:0", "--max-inflight", "0", "--max-model-len", "1000000"}
		if r.n > 1 && r.sync != "none" {
			args = append(args, "--replica-id", fmt.Sprintf("replica-%d", i), "--ring-listen", ringAddrs[i],
				"--peers", strings.Join(ringAddrs, ","), "--sync-interval", r.interval.String(),
				fmt.Sprintf("--ring-broadcast=%v", r.sync == "broadcast"))
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			stop()
			return "", nil, err
		}
		if err := cmd.Start(); err != nil {
			stop()
			return "", nil, err
		}
		cmds = append(cmds, cmd)
		base, err := waitListening(stderr)
		if err == nil {
			err = waitReady(ctx, base)
		}
		if err != nil {
			stop()
			return "", nil, err
		}
		bases = append(bases, base)
	}
	if r.targets > 0 {
		bases = bases[:r.targets]
	}
	return strings.Join(bases, ","), stop, nil
}

// freeAddrs finds n free loopback ports for the replicas' ring listeners
// (they must be known before the replicas start, to list them as peers).
func freeAddrs(n int) ([]string, error) {
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
