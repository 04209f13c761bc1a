//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Helpers of the fleet-operations tests (fleet_ops_test.go): engines to
// add and remove, the engine API, /debug/state, steady traffic, and the
// deploy files' metrics.

const fleetToken = "fleet-admin-token"

// fleetSims starts n engines (kvgate-sim, default timing so streams take a
// while) and returns their addresses; engine i's handshake id is e<i>.
func fleetSims(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for i := range n {
		e := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", fmt.Sprintf("e%d", i), "--model", model, "--profile", "default")
		addrs = append(addrs, e.waitLog(t, "serving")["addr"].(string))
	}
	return addrs
}

// writeFile replaces path's content whole (write, then rename), as the
// engine file's documentation asks.
func writeFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// adminCall sends an engine API request with the admin token.
func adminCall(t *testing.T, admin, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fleetToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// fleetState is what these tests read of /debug/state.
type fleetState struct {
	Engines []struct {
		Addr, ID, State string
		PeerLoad        struct{ Requests int64 } `json:"peer_load"`
	} `json:"engines"`
	Index struct {
		Engines []struct {
			Engine string
			Blocks [3]uint64
		} `json:"engines"`
	} `json:"index"`
	Ring struct {
		Members       []string `json:"members"`
		Epoch         uint64   `json:"epoch"`
		RoundsDone    uint64   `json:"rounds_done"`
		SharedEngines int      `json:"shared_engines"`
		Engines       int      `json:"engines"`
	} `json:"ring"`
}

func fleetDebugState(t *testing.T, admin string) *fleetState {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st fleetState
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// engineState is the state of the engine at addr ("" when not listed) and
// the GPU blocks the index holds for it (-1 when it has no slot).
func (st *fleetState) engine(addr string) (state string, blocks int64) {
	blocks = -1
	for _, e := range st.Engines {
		if e.Addr == addr {
			state = e.State
		}
	}
	for _, e := range st.Index.Engines {
		if e.Engine == addr {
			blocks = int64(e.Blocks[0])
		}
	}
	return state, blocks
}

// waitEngine polls /debug/state until cond holds for the engine at addr.
func waitEngine(t *testing.T, admin, addr, what string, cond func(state string, blocks int64) bool) {
	t.Helper()
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if s, b := fleetDebugState(t, admin).engine(addr); !cond(s, b) {
			return fmt.Errorf("engine %s: %s (state %q, %d blocks in the index)", addr, what, s, b)
		}
		return nil
	})
}

// load is steady traffic from two clients (steadyLoad).
type load struct {
	sent atomic.Int64
	stop func() []string // ends the traffic, returns every failure
}

// more waits until the clients have sent n more requests.
func (l *load) more(t *testing.T, n int64, after string) {
	t.Helper()
	want := l.sent.Load() + n
	checkFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		if got := l.sent.Load(); got < want {
			return fmt.Errorf("%d of %d requests sent %s", got, want, after)
		}
		return nil
	})
}

// steadyLoad sends completions from two clients until stop is called.
func steadyLoad(t *testing.T, base string) *load {
	l := &load{}
	sent := &l.sent
	var mu sync.Mutex
	var failures []string
	done := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				prompt := fmt.Sprintf("Client %d request %d. %s", c, i%16, strings.Repeat("Context that engines cache in blocks. ", 30))
				b, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 2})
				resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
				sent.Add(1)
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d %s", resp.StatusCode, body))
					mu.Unlock()
				}
			}
		}()
	}
	l.stop = func() []string {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return failures
	}
	return l
}

// metricName finds the metric names in a rule or dashboard file.
var metricName = regexp.MustCompile(`\bkvgate_[a-z0-9_]+`)

// checkDeployMetrics: every kvgate metric that the deploy's alert rules
// and Grafana dashboard name is exported by this running kvgate (a
// histogram's _bucket, _sum and _count by its name).
func checkDeployMetrics(t *testing.T, admin string) {
	t.Helper()
	r, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposed, _ := io.ReadAll(r.Body)
	r.Body.Close()
	types := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllSubmatch(exposed, -1) {
		types[string(m[1])] = string(m[2])
	}
	var named []string
	for _, f := range []string{"prometheus/kvgate-rules.yaml", "grafana/kvgate-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "cmd", "kvgate", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range metricName.FindAll(b, -1) {
			named = append(named, string(n))
		}
	}
	slices.Sort(named)
	named = slices.Compact(named)
	var missing []string
	for _, n := range named {
		if _, ok := types[n]; ok {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if types[base] == "histogram" {
			continue
		}
		missing = append(missing, n)
	}
	if len(named) < 15 || len(missing) > 0 {
		t.Fatalf("of %d metrics the deploy files name, kvgate exports none of %v", len(named), missing)
	}
	t.Logf("all %d metrics the alert rules and the dashboard name are exported", len(named))
}
