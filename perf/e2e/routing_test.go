//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRerouteBeforeFirstToken: the engine a request went to dies before its
// first token; the client never notices, another engine answers.
func TestRerouteBeforeFirstToken(t *testing.T) {
	fast := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", "fast", "--model", model, "--profile", "zero")
	// A tiny speed makes the slow engine's first prefill step take minutes.
	slow := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", "slow", "--model", model, "--speed", "0.0001")
	fastAddr, slowAddr := fast.waitLog(t, "serving")["addr"].(string), slow.waitLog(t, "serving")["addr"].(string)
	// Round-robin sends the first request to the second engine listed.
	_, base := startKvgate(t, "--engine", fastAddr+","+slowAddr, "--policy", "round-robin")
	waitReady(t, base)
	type result struct {
		resp *http.Response
		body []byte
	}
	done := make(chan result, 1)
	go func() {
		r, b := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "hello", "max_tokens": 3})
		done <- result{r, b}
	}()
	slow.waitLog(t, "router connected") // (already logged; keeps the order obvious)
	// The request is routed to the slow engine and waits on it.
	waitMetric(t, adminOf(t, base), `kvgate_engine_inflight_requests{engine="`+slowAddr+`"}`, " 1")
	_ = slow.cmd.Process.Kill()
	res := <-done
	if res.resp.StatusCode != 200 || res.resp.Header.Get("x-kvgate-engine") != "fast" {
		t.Fatalf("after the slow engine died: %d from %q: %s", res.resp.StatusCode, res.resp.Header.Get("x-kvgate-engine"), res.body)
	}
}

// TestQueueFull: with one request allowed per engine and that one slot
// taken, the next request gets 429 with Retry-After in the API's format.
func TestQueueFull(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-speed", "0.001", "--max-inflight", "1")
	go func() {
		b, _ := json.Marshal(map[string]any{"model": model, "prompt": "occupy", "max_tokens": 5})
		if r, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b)); err == nil {
			r.Body.Close()
		}
	}()
	waitMetric(t, adminOf(t, base), `kvgate_engine_inflight_requests{engine=`, " 1")
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		r, body := post(t, base+"/v1/messages", map[string]any{"model": model, "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
		if r.StatusCode != 429 {
			return fmt.Errorf("never 429: last %d %s", r.StatusCode, body)
		}
		if r.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"rate_limit_error"`) {
			t.Fatalf("429 without Retry-After or Anthropic body: %v %s", r.Header, body)
		}
		return nil
	})
}

// TestSlowlorisIsCutOff: a client that never finishes its header is
// disconnected after the header timeout.
func TestSlowlorisIsCutOff(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero", "--header-timeout", "1s")
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	if !closedByPeer(c) {
		t.Fatal("a partial header held the connection open")
	}
}

// adminOf returns the admin URL of the kvgate serving base.
func adminOf(t *testing.T, base string) string {
	t.Helper()
	a, ok := admins[base]
	if !ok {
		t.Fatalf("no admin address for %s", base)
	}
	return a
}

// waitMetric polls /metrics until a line starting with prefix ends with suffix.
func waitMetric(t *testing.T, admin, prefix, suffix string) {
	t.Helper()
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := http.Get(admin + "/metrics")
		if err != nil {
			return fmt.Errorf("metric %s...%s: %v", prefix, suffix, err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		r.Body.Close()
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, prefix) && strings.HasSuffix(line, suffix) {
				return nil
			}
		}
		return fmt.Errorf("metric %s...%s never appeared", prefix, suffix)
	})
}
