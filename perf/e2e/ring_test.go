//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestReplicaRing: three kvgate processes in front of the same engines form
// a ring. A replica that starts after traffic has filled the engines' caches
// catches up from engine snapshots (its index similarity to the others
// reaches 1); a replica killed without warning leaves the others' ring.
func TestReplicaRing(t *testing.T) {
	var engines []string
	for i := range 2 {
		e := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", fmt.Sprintf("e%d", i), "--model", model, "--profile", "zero")
		engines = append(engines, e.waitLog(t, "serving")["addr"].(string))
	}
	ring := freeLoopbackAddrs(t, 3)
	replica := func(i int) (*proc, string) {
		return startKvgate(t, "--engine", strings.Join(engines, ","), "--replica-id", fmt.Sprintf("replica-%d", i),
			"--ring-listen", ring[i], "--peers", strings.Join(ring, ","), "--sync-interval", "2ms",
			"--ring-heartbeat", "50ms", "--ring-dead-after", "500ms")
	}
	_, a := replica(0)
	_, b := replica(1)
	waitReady(t, a)
	waitReady(t, b)
	waitMetric(t, adminOf(t, a), "kvgate_ring_members ", " 2")

	// Traffic through both fills the engines' caches.
	for i := range 8 {
		base := []string{a, b}[i%2]
		prompt := fmt.Sprintf("Request %d of the ring test. %s", i, strings.Repeat("Shared context for caching. ", 40))
		if resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 4}); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}

	// A late replica snapshots the engines and catches up.
	late, c := replica(2)
	waitReady(t, c)
	for _, base := range []string{a, b, c} {
		waitMetric(t, adminOf(t, base), "kvgate_ring_members ", " 3")
	}
	waitMetric(t, adminOf(t, c), `kvgate_ring_peer_index_similarity{peer="replica-0"}`, " 1")
	waitMetric(t, adminOf(t, a), `kvgate_ring_peer_index_similarity{peer="replica-2"}`, " 1")

	var st struct {
		Ring struct {
			Members    []string `json:"members"`
			RoundsDone uint64   `json:"rounds_done"`
		} `json:"ring"`
	}
	r, err := http.Get(adminOf(t, a) + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if len(st.Ring.Members) != 3 {
		t.Fatalf("/debug/state ring members %v", st.Ring.Members)
	}

	// Killed without a drain: the others re-form without it.
	_ = late.cmd.Process.Kill()
	waitMetric(t, adminOf(t, a), "kvgate_ring_members ", " 2")
	waitMetric(t, adminOf(t, b), "kvgate_ring_members ", " 2")
}

func freeLoopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		defer ln.Close()
	}
	return out
}
