//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEngineKilledMidStream: two kvgate-sim processes behind kvgate; the one
// serving a stream is killed. The client gets a well-formed error event and
// the end of the stream; new requests go to the survivor.
func TestEngineKilledMidStream(t *testing.T) {
	var sims []*proc
	var addrs []string
	for _, id := range []string{"sim-a", "sim-b"} {
		p := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", id, "--model", model, "--profile", "default")
		sims = append(sims, p)
		addrs = append(addrs, p.waitLog(t, "serving")["addr"].(string))
	}
	_, base := startKvgate(t, "--engine", strings.Join(addrs, ","))
	waitReady(t, base)
	b, _ := json.Marshal(map[string]any{"model": model, "prompt": "a long answer please", "max_tokens": 100000,
		"ignore_eos": true, "stream": true})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	victim := map[string]*proc{"sim-a": sims[0], "sim-b": sims[1]}[resp.Header.Get("x-kvgate-engine")]
	if victim == nil {
		t.Fatalf("engine header %q", resp.Header.Get("x-kvgate-engine"))
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		lines = append(lines, line)
		if len(lines) == 3 && !killed {
			_ = victim.cmd.Process.Kill()
			killed = true
		}
	}
	if n := len(lines); n < 3 || lines[n-1] != "data: [DONE]" || !strings.Contains(lines[n-2], `"error"`) {
		t.Fatalf("stream after the engine died: %q", lines[max(0, len(lines)-3):])
	}
	// The survivor serves what comes next.
	for range 3 {
		r, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "still there?", "max_tokens": 2})
		if r.StatusCode != 200 {
			t.Fatalf("after the kill: %d %s", r.StatusCode, body)
		}
	}
}

// waitReady polls /ready.
func waitReady(t *testing.T, base string) {
	t.Helper()
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := http.Get(base + "/ready")
		if err != nil {
			return fmt.Errorf("kvgate never became ready: %v", err)
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("kvgate never became ready: /ready answers %d", r.StatusCode)
		}
		return nil
	})
}

// TestSlowReaderIsCutOff: a client that stops reading a long stream is
// disconnected once its output buffer fills, and the daemon keeps serving.
func TestSlowReaderIsCutOff(t *testing.T) {
	p, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero", "--max-pending-write", "65536",
		"--socket-send-buffer", "16384", // a small kernel buffer, so the backlog shows in user space soon
		// An event of over half the budget (the simulator's bursts merge thousands of tokens
		// when the handler runs late) is paced instead, and cut off after this stall.
		"--write-stall-timeout", "2s")
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // a small window, so the kernel buffers fill quickly
	}
	body := `{"model":"` + model + `","prompt":"stream forever","max_tokens":100000,"ignore_eos":true,"stream":true}`
	req := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(len(body)) + "\r\n\r\n" + body
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	// Do not read. The daemon must keep serving others meanwhile, and cut
	// this client off once 64 KB wait for it.
	r, out := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "hi", "max_tokens": 1})
	if r.StatusCode != 200 {
		t.Fatalf("daemon not serving others: %d %s", r.StatusCode, out)
	}
	p.waitLog(t, "client not reading")
	if !closedByPeer(c) {
		t.Fatal("slow reader was not disconnected")
	}
	r, out = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "hi", "max_tokens": 1})
	if r.StatusCode != 200 {
		t.Fatalf("daemon not serving after the cut: %d %s", r.StatusCode, out)
	}
}

// closedByPeer reads what was buffered and reports whether the peer closed
// the connection (EOF or reset) within ten seconds.
func closedByPeer(c net.Conn) bool {
	buf := make([]byte, 1<<20)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := c.Read(buf); err != nil {
			ne, ok := err.(net.Error)
			return !(ok && ne.Timeout())
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
