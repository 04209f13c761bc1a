//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fleet-operations tests (issue 27): engines that come and go at run
// time, by the engine file and by the admin API, while requests run;
// replicas whose engine sets differ; and the deploy files' metrics.

// TestEnginesComeAndGo: one kvgate with an engine from --engine and one
// from --engine-file; while requests run, an engine added by the admin
// API takes requests, one dropped from the file leaves (blocks out of the
// index), and one drained by the admin API while it streams finishes the
// stream, takes no new request and leaves the index. No request fails.
func TestEnginesComeAndGo(t *testing.T) {
	e := fleetSims(t, 3)
	dir := t.TempDir()
	file, token := filepath.Join(dir, "engines"), filepath.Join(dir, "token")
	writeFile(t, file, "# engines found by file", e[1])
	writeFile(t, token, fleetToken)
	_, base := startKvgate(t, "--engine", e[0], "--engine-file", file, "--engine-file-interval", "50ms",
		"--admin-token-file", token)
	admin := adminOf(t, base)
	waitReady(t, base)
	waitMetric(t, admin, fmt.Sprintf(`kvgate_engine_ready{engine="%s"}`, e[1]), " 1")
	traffic := steadyLoad(t, base)
	traffic.more(t, 4, "before any change")

	// Added by the admin API: it connects, snapshots and takes requests.
	t0 := time.Now()
	if code, body := adminCall(t, admin, "POST", "/admin/engines", fmt.Sprintf(`{"address": %q}`, e[2])); code != 201 {
		t.Fatalf("POST /admin/engines: %d %s", code, body)
	}
	if code, body := adminCall(t, admin, "POST", "/admin/engines", `{"address": "no-port"}`); code != 400 || !bytes.Contains(body, []byte(`"bad_address"`)) {
		t.Fatalf("POST a bad address: %d %s", code, body)
	}
	waitEngine(t, admin, e[2], "ready with blocks from requests", func(s string, b int64) bool { return s == "ready" && b > 0 })
	t.Logf("added by the admin API: ready with blocks in the index after %v", time.Since(t0).Round(time.Millisecond))
	waitEngine(t, admin, e[1], "blocks before it leaves", func(_ string, b int64) bool { return b > 0 })
	traffic.more(t, 4, "after e2 joined")

	// Dropped from the file: it leaves the pool and the index.
	t0 = time.Now()
	writeFile(t, file, "# e1 is gone")
	waitEngine(t, admin, e[1], "out of the pool and the index", func(s string, b int64) bool { return s == "" && b == -1 })
	t.Logf("dropped from the engine file: out of the pool and the index after %v", time.Since(t0).Round(time.Millisecond))
	traffic.more(t, 4, "after e1 left")

	failures := traffic.stop()
	if sent := traffic.sent.Load(); len(failures) > 0 {
		t.Fatalf("%d requests while engines came and went, %d failed: %v", sent, len(failures), failures[:min(len(failures), 5)])
	}
	t.Logf("%d requests while engines came and went, none failed", traffic.sent.Load())

	// Drained while it streams: the stream finishes, then it leaves the index.
	var resp *http.Response
	for i := range 20 { // until a stream lands on the engine to drain (a new prompt each: no cache pulls it)
		body, _ := json.Marshal(map[string]any{"model": model, "prompt": fmt.Sprintf("Answer %d at length, please.", i),
			"max_tokens": 300, "ignore_eos": true, "stream": true})
		r, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if r.Header.Get("x-kvgate-engine") == "e2" {
			resp = r
			break
		}
		r.Body.Close() // the client goes: kvgate cancels the stream
	}
	if resp == nil {
		t.Fatal("no stream of 20 went to e2")
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil { // the stream has begun
		t.Fatal(err)
	}
	if code, body := adminCall(t, admin, "POST", "/admin/engines/e2/drain", ""); code != 202 {
		t.Fatalf("drain: %d %s", code, body)
	}
	waitMetric(t, admin, fmt.Sprintf(`kvgate_engine_ready{engine="%s"}`, e[2]), " 0")
	for i := range 6 { // new requests go elsewhere
		r, b := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": fmt.Sprintf("after the drain %d", i), "max_tokens": 2})
		if r.StatusCode != 200 || r.Header.Get("x-kvgate-engine") == "e2" {
			t.Fatalf("a request after the drain: %d on %q: %s", r.StatusCode, r.Header.Get("x-kvgate-engine"), b)
		}
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("the drained engine's stream broke: %v", err)
	}
	if !bytes.Contains(rest, []byte(`"finish_reason":"length"`)) || !bytes.Contains(rest, []byte("data: [DONE]")) || sseError(rest) != "" {
		t.Fatalf("the drained engine's stream did not finish cleanly: ...%s", rest[max(0, len(rest)-400):])
	}
	waitEngine(t, admin, e[2], "drained and out of the index", func(s string, b int64) bool { return s == "drained" && b == -1 })

	// Deleted: it leaves the list too.
	if code, body := adminCall(t, admin, "DELETE", "/admin/engines/e2", ""); code != 202 {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	waitEngine(t, admin, e[2], "unlisted", func(s string, _ int64) bool { return s == "" })
	if code, _ := adminCall(t, admin, "DELETE", "/admin/engines/e2", ""); code != 404 {
		t.Fatalf("DELETE of a removed engine: %d, want 404", code)
	}
}

// TestReplicasWithDifferentEngines: two replicas that see different engine
// sets (one lacks e2 at first, and they list the engines in other orders)
// form one ring over the two engines they share, each counting the other's
// requests on an engine by its id, keep the ring while the second learns
// e2 from its engine file, and converge on all three.
func TestReplicasWithDifferentEngines(t *testing.T) {
	e := fleetSims(t, 3)
	ring := freeLoopbackAddrs(t, 2)
	file := filepath.Join(t.TempDir(), "engines")
	writeFile(t, file, "# e2 not yet")
	replica := func(i int, args ...string) (base, admin string) {
		_, base = startKvgate(t, append([]string{"--replica-id", fmt.Sprintf("replica-%d", i), "--ring-listen", ring[i],
			"--peers", strings.Join(ring, ","), "--sync-interval", "2ms", "--ring-heartbeat", "50ms", "--ring-dead-after", "1s"}, args...)...)
		waitReady(t, base)
		return base, adminOf(t, base)
	}
	// No engine at the same position in both lists: only agreeing by id
	// puts a replica's load on the right engine of the other.
	_, a := replica(0, "--engine", strings.Join([]string{e[2], e[1], e[0]}, ","))
	bBase, b := replica(1, "--engine", strings.Join([]string{e[1], e[0]}, ","), "--engine-file", file, "--engine-file-interval", "50ms")

	ringState := func(want int) {
		t.Helper()
		checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			for _, adm := range []string{a, b} {
				st := fleetDebugState(t, adm).Ring
				if len(st.Members) != 2 || st.SharedEngines != want || st.RoundsDone == 0 {
					return fmt.Errorf("%s: members %v, %d shared engines (want %d), %d rounds", adm, st.Members, st.SharedEngines, want, st.RoundsDone)
				}
			}
			return nil
		})
	}
	ringState(2)

	// A stream through replica-1 counts on replica-0 for the same engine,
	// at another position in its list.
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "Stream for the ring.", "max_tokens": 300, "ignore_eos": true, "stream": true})
	resp, err := http.Post(bBase+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("x-kvgate-engine")
	peerRequests := func(want int64) {
		t.Helper()
		checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			for _, eng := range fleetDebugState(t, a).Engines {
				if eng.ID == id && eng.PeerLoad.Requests == want {
					return nil
				}
			}
			return fmt.Errorf("replica-0 never counted %d peer requests on %q: %+v", want, id, fleetDebugState(t, a).Engines)
		})
	}
	peerRequests(1)
	resp.Body.Close()
	peerRequests(0)

	before := fleetDebugState(t, a).Ring
	if before.Engines != 3 {
		t.Fatalf("replica-0 has %d engines, want 3", before.Engines)
	}

	t0 := time.Now()
	writeFile(t, file, e[2])
	// The ring stays formed while the views meet: sample it until they do.
	checkFor(t, 60*time.Second, 5*time.Millisecond, func() error {
		for _, adm := range []string{a, b} {
			st := fleetDebugState(t, adm).Ring
			if len(st.Members) != 2 {
				t.Fatalf("%s left the ring while the engine sets differed: members %v", adm, st.Members)
			}
			if st.SharedEngines != 3 {
				return fmt.Errorf("%s shares %d engines", adm, st.SharedEngines)
			}
		}
		return nil
	})
	t.Logf("engine file changed: both replicas share 3 engines after %v, ring kept throughout", time.Since(t0).Round(time.Millisecond))
	after := fleetDebugState(t, a).Ring
	if after.Epoch == before.Epoch {
		t.Fatal("the shared engines changed without a new epoch")
	}
	done := after.RoundsDone
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := fleetDebugState(t, a).Ring.RoundsDone; n <= done {
			return fmt.Errorf("no round completed over the three engines (%d)", n)
		}
		return nil
	})
	checkDeployMetrics(t, a)
}

// TestEngineFromDNS: an engine found only through --engine-dns (the
// loopback name, from /etc/hosts) serves requests; the DNS source itself is
// tested against a DNS responder in dataplane/discovery.
func TestEngineFromDNS(t *testing.T) {
	e := fleetSims(t, 1)
	_, port, _ := strings.Cut(e[0], ":")
	_, base := startKvgate(t, "--engine-dns", "localhost:"+port, "--engine-dns-interval", "100ms")
	waitReady(t, base)
	if r, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "found by DNS", "max_tokens": 2}); r.StatusCode != 200 || r.Header.Get("x-kvgate-engine") != "e0" {
		t.Fatalf("through the engine found by DNS: %d on %q: %s", r.StatusCode, r.Header.Get("x-kvgate-engine"), body)
	}
}
