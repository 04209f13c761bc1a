package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/kvgate/kvgate/perf/loadgen"
	"github.com/kvgate/kvgate/perf/workload"
)

// externalFlags name engines that compare did not start and does not
// stop: only the kvgate routers are started per policy, in front of them.
type externalFlags struct {
	// engineAddrs are wire-protocol engines (bridges, kvgate-sim),
	// httpEngines OpenAI-compatible HTTP engines.
	engineAddrs, httpEngines []string
	// llamacpp are the llama.cpp servers behind those engines: erased
	// before each policy, their counters read around each run.
	llamacpp []string
	// settle bounds the wait, after a router starts, for every engine to
	// be ready and for the router's index to be empty after a flush.
	settle time.Duration
	// enginePids are the engines' processes when this process started
	// them (the llamacpp command), so their CPU counts as the benchmark's.
	enginePids []int
}

func (x *externalFlags) register(fs *flag.FlagSet) {
	list := func(dst *[]string) func(string) error {
		return func(v string) error {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSuffix(strings.TrimSpace(s), "/"); s != "" {
					*dst = append(*dst, s)
				}
			}
			return nil
		}
	}
	fs.Func("engine-addrs", "HOST:PORT,... of wire-protocol engines that run already (kvgate-bridge, kvgate-sim): no simulated engines are started, only kvgate per policy in front of these", list(&x.engineAddrs))
	fs.Func("http-engines", "URL,... of OpenAI-compatible HTTP engines that run already (kvgate --http-engine); kvgate's passthrough routes them by the kv cost whatever the policy", list(&x.httpEngines))
	fs.Func("llamacpp", "URL,... of the llama.cpp servers behind --engine-addrs or --http-engines: before each policy every slot is erased (POST /slots/ID?action=erase, which needs llama-server --slot-save-path), and the prefix hit rate is read from their own /metrics counters over each run", list(&x.llamacpp))
	fs.DurationVar(&x.settle, "settle-timeout", 20*time.Second, "with --engine-addrs or --http-engines: how long a new router may take to see every engine ready and, after a flush, its index empty")
}

// external reports whether engines that run already were named.
func (x *externalFlags) external() bool { return len(x.engineAddrs)+len(x.httpEngines) > 0 }

func (x *externalFlags) check() error {
	if len(x.llamacpp) > 0 && !x.external() {
		return errors.New("--llamacpp names the servers behind --engine-addrs or --http-engines: give those too")
	}
	return nil
}

// flushNote says how the engines' caches are made cold between policies.
func (x *externalFlags) flushNote() string {
	if len(x.llamacpp) == 0 {
		return "none: engines keep their caches between policies (no --llamacpp), so each policy finds what the previous ones left"
	}
	return fmt.Sprintf("before each policy every slot of the %d llama.cpp servers is erased (POST /slots/ID?action=erase) and "+
		"the new router's index is waited for until empty; the erase leaves llama.cpp's host-memory prompt cache alone, "+
		"so the servers must run with --cache-ram 0 for the flush to be complete (kvgate-bench llamacpp starts them so)", len(x.llamacpp))
}

// compareExternal runs each policy against the engines x names: a flush
// where there are llama.cpp servers to flush, kvgate routers, the
// workload, and the engines' own counters around it.
func compareExternal(ctx context.Context, l *loadFlags, c *compareFlags, bin string, wl *workload.Workload, stdout, stderr io.Writer) error {
	x := &c.ext
	out := c.comparison(l)
	out.Flags["engine_addrs"], out.Flags["http_engines"], out.Flags["llamacpp"] = x.engineAddrs, x.httpEngines, x.llamacpp
	out.Flags["flush"] = x.flushNote()
	fmt.Fprintf(stderr, "engines: %d wire-protocol, %d HTTP, started elsewhere; flush: %s\n", len(x.engineAddrs), len(x.httpEngines), x.flushNote())
	if len(x.httpEngines) > 0 {
		fmt.Fprintln(stderr, "note: kvgate routes HTTP engines (passthrough) by its kv cost whatever --policy says; only wire-protocol engines follow the policy")
	}
	if len(x.llamacpp) > 0 {
		out.EngineCounters = map[string]*engineRun{}
	}
	return eachPolicy(ctx, out, c.policies, l.jsonOut, c.reportDir, stdout, func(policy string) (*loadgen.Result, error) {
		fmt.Fprintf(stderr, "== %s: %d requests of %s on %d engines started elsewhere\n", policy, len(wl.Requests), l.workload,
			len(x.engineAddrs)+len(x.httpEngines))
		res, run, err := x.measure(ctx, policy, bin, l, &c.rf, wl, stderr)
		if run != nil {
			out.EngineCounters[policy] = run
		}
		return res, err
	})
}

// measure runs one policy: flush, routers, wait, counters, load, counters.
func (x *externalFlags) measure(ctx context.Context, policy, bin string, l *loadFlags, rf *replicaFlags,
	wl *workload.Workload, progress io.Writer) (*loadgen.Result, *engineRun, error) {
	var run *engineRun
	if len(x.llamacpp) > 0 {
		fl, err := flushLlamaCpp(ctx, x.llamacpp)
		if err != nil {
			return nil, nil, err
		}
		run = &engineRun{Source: counterSource, Flush: fl}
		fmt.Fprintf(progress, "   flushed: %d slots erased on %d llama.cpp servers (%d cached tokens dropped)\n",
			fl.Slots, len(x.llamacpp), fl.ErasedTokens)
	}
	rs, base, err := rf.startRouters(ctx, bin, policy, x.engineAddrs, x.httpEngines)
	if err != nil {
		return nil, nil, err
	}
	defer rs.Stop()
	start := time.Now()
	var ids []string
	for _, admin := range rs.Admins {
		if ids, err = waitSettled(ctx, admin, len(x.engineAddrs)+len(x.httpEngines), run != nil, x.settle); err != nil {
			return nil, nil, err
		}
	}
	what := "every engine ready"
	if run != nil {
		what += ", index empty"
	}
	fmt.Fprintf(progress, "   kvgate (%d router(s)): %s after %.1f s\n", len(rs.Admins), what, time.Since(start).Seconds())
	var before []llamaCounters
	if run != nil {
		if before, err = readCounters(ctx, x.llamacpp); err != nil {
			return nil, nil, err
		}
	}
	o, err := l.options(base, progress)
	if err != nil {
		return nil, nil, err
	}
	cpu := startCPU(append(rs.Pids(), x.enginePids...), len(x.enginePids) > 0)
	res, err := loadgen.Run(ctx, o, wl)
	if err != nil {
		return nil, nil, err
	}
	share := cpu.stop()
	if run == nil {
		share.print(progress) // with counters, it is printed with them
	} else {
		after, err := readCounters(ctx, x.llamacpp)
		if err != nil {
			return nil, nil, err
		}
		run.difference(x.llamacpp, before, after)
		run.CPU = share
	}
	res.Flags = l.flagMap()
	res.Flags["policy"] = policy
	rf.record(res.Flags)
	if len(x.httpEngines) == 0 { // HTTP engines' responses do not name the engine
		res.CountEngines(ids)
	}
	return res, run, nil
}

// debugState is what waitSettled reads of kvgate's /debug/state
// (dataplane/admin.State).
type debugState struct {
	Engines []struct {
		Addr, ID, State string
	} `json:"engines"`
	Index struct {
		Entries uint64 `json:"entries"`
	} `json:"index"`
}

// waitSettled polls a router's /debug/state until it lists n engines, all
// ready, and, when empty is set, its index holds no entry (the engines'
// bridges have reported the flush), and returns the wire engines' ids.
func waitSettled(ctx context.Context, admin string, n int, empty bool, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		st, err := readState(ctx, client, admin)
		if err == nil {
			ready, ids := 0, []string(nil)
			for _, e := range st.Engines {
				if e.State == "ready" {
					ready++
				}
				if e.ID != "" {
					ids = append(ids, e.ID)
				}
			}
			if ready == n && len(st.Engines) == n && (!empty || st.Index.Entries == 0) {
				return ids, nil
			}
			last = fmt.Sprintf("%d of %d engines ready, %d index entries", ready, n, st.Index.Entries)
		} else if ctx.Err() == nil { // the deadline's own error says nothing
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kvgate at %s not settled in %v: %s", admin, timeout, last)
		case <-tick.C:
		}
	}
}

func readState(ctx context.Context, c *http.Client, admin string) (*debugState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/debug/state", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/debug/state: status %d", resp.StatusCode)
	}
	var st debugState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding /debug/state: %w", err)
	}
	return &st, nil
}
