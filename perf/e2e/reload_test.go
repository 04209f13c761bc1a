//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReload: kvgate reads its --config file again on SIGHUP and on POST
// /admin/reload. The new API key works and the old one is refused, the
// log level drops to debug (the added engine's admission is logged at
// debug), an engine added to --engine takes requests and one taken out
// leaves, and a flag that cannot change live is refused with a log line
// naming it.
func TestReload(t *testing.T) {
	sims := fleetSims(t, 2)
	dir := t.TempDir()
	keys, token, conf := filepath.Join(dir, "keys"), filepath.Join(dir, "token"), filepath.Join(dir, "kvgate.conf")
	writeFile(t, keys, "old-key")
	writeFile(t, token, fleetToken)
	writeFile(t, conf, "engine="+sims[0], "api-key-file="+keys, "log-level=info", "retries=2")
	p, base := startKvgate(t, "--config", conf, "--admin-token-file", token)
	admin := adminOf(t, base)
	waitEngine(t, admin, sims[0], "ready", func(s string, _ int64) bool { return s == "ready" })
	if status := completionWithKey(t, base, "old-key"); status != 200 {
		t.Fatalf("old key before the reload: %d", status)
	}

	writeFile(t, keys, "new-key")
	writeFile(t, conf, "engine="+sims[0]+","+sims[1], "api-key-file="+keys, "log-level=debug", "retries=5")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lines := waitLogs(t, p, "cannot change while kvgate runs", "config reloaded", "engine admitted")
	if f := lines["cannot change while kvgate runs"]["flag"]; f != "--retries" {
		t.Fatalf("refused flag %v, want --retries", f)
	}
	if l := lines["engine admitted"]; l["level"] != "DEBUG" || l["engine"] != sims[1] {
		t.Fatalf("after the reload to debug: %v, want the added engine's admission at DEBUG", l)
	}
	if applied := fmt.Sprint(lines["config reloaded"]["applied"]); applied != "[--api-key-file --log-level --engine]" {
		t.Fatalf("applied %s", applied)
	}
	waitEngine(t, admin, sims[1], "ready", func(s string, _ int64) bool { return s == "ready" })
	if status := completionWithKey(t, base, "old-key"); status != 401 {
		t.Fatalf("old key after the reload: %d, want 401", status)
	}
	if status := completionWithKey(t, base, "new-key"); status != 200 {
		t.Fatalf("new key after the reload: %d", status)
	}

	// The admin call: the first engine taken out of --engine leaves.
	writeFile(t, conf, "engine="+sims[1], "api-key-file="+keys, "log-level=debug", "retries=5")
	status, body := adminCall(t, admin, "POST", "/admin/reload", "")
	var res struct{ Applied, Refused []string }
	if err := json.Unmarshal(body, &res); err != nil || status != 200 {
		t.Fatalf("POST /admin/reload: %d %s", status, body)
	}
	if !slices.Equal(res.Applied, []string{"--engine"}) || !slices.Equal(res.Refused, []string{"--retries"}) {
		t.Fatalf("POST /admin/reload: applied %v, refused %v", res.Applied, res.Refused)
	}
	waitEngine(t, admin, sims[0], "gone from the pool", func(s string, _ int64) bool { return s == "" || s == "drained" })
	if status := completionWithKey(t, base, "new-key"); status != 200 {
		t.Fatalf("a request on the engine left: %d", status)
	}
	// An invalid file changes nothing, and says why.
	writeFile(t, conf, "engine="+sims[1], "log-level=loud")
	if status, body := adminCall(t, admin, "POST", "/admin/reload", ""); status != 400 || !strings.Contains(string(body), "bad_config") {
		t.Fatalf("invalid config: %d %s", status, body)
	}
	if status := completionWithKey(t, base, "new-key"); status != 200 {
		t.Fatalf("new key after an invalid reload: %d", status)
	}
}

// completionWithKey sends a short completion with an API key and returns
// its status.
func completionWithKey(t *testing.T, base, key string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/completions",
		strings.NewReader(`{"model":"`+model+`","prompt":"reload","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitLogs reads p's log lines until one containing each of msgs has come,
// in any order, and returns the first of each.
func waitLogs(t *testing.T, p *proc, msgs ...string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	timeout := time.After(time.Minute)
	for len(got) < len(msgs) {
		select {
		case m := <-p.lines:
			msg, _ := m["msg"].(string)
			for _, want := range msgs {
				if _, seen := got[want]; !seen && strings.Contains(msg, want) {
					got[want] = m
				}
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kvgate exited (%v) before logging all of %q", err, msgs)
		case <-timeout:
			t.Fatalf("within a minute, of %q only %d logged", msgs, len(got))
		}
	}
	return got
}
