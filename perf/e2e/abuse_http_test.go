//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// rssBound is how much the daemon's RSS may grow over its start while
// hostile clients do their worst: before the limits, one pipelining
// client took it from 0.97 to 4.27 GB and six trailer floods to 2.4 GB.
const rssBound = 256 << 20

// TestAbuseHTTP: hostile clients against a real kvgate on loopback. Each
// hostile request gets its 4xx in an API's error shape, well-behaved
// clients streaming all along complete every stream, the daemon's RSS
// stays within rssBound of its start, and SIGTERM after clients left
// mid-stream exits as soon as the last real stream ends.
func TestAbuseHTTP(t *testing.T) {
	p, base := startKvgate(t, "--sim-engines", "2", "--sim-profile", "default", "--api-key", "k1",
		"--max-model-len", "4096", "--header-timeout", "2s", "--max-pending-write", "65536", "--drain-timeout", "60s")
	waitReady(t, base)
	pid := p.cmd.Process.Pid
	start, err := rssOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	peak := rssPeak(t, pid)

	quit, errs := make(chan struct{}), make(chan error, 16)
	var good sync.WaitGroup
	var streams atomic.Int64
	for i := range 4 {
		good.Add(1)
		go func() {
			defer good.Done()
			for n := 0; ; n++ {
				select {
				case <-quit:
					return
				default:
				}
				if err := goodStream(base, fmt.Sprintf("client %d, turn %d", i, n)); err != nil {
					errs <- err
					return
				}
				streams.Add(1)
			}
		}()
	}

	for _, c := range abuseCases(base) {
		t.Run(c.name, c.run)
	}

	close(quit)
	good.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a well-behaved client: %v", err)
	}
	if streams.Load() < 4 {
		t.Errorf("well-behaved clients completed only %d streams", streams.Load())
	}
	top := peak()
	t.Logf("RSS %d MB at start, peak %d MB (bound: start + %d MB); %d good streams completed meanwhile",
		start>>20, top>>20, rssBound>>20, streams.Load())
	if top > start+rssBound {
		t.Errorf("RSS peaked at %d MB, more than %d MB over the start (%d MB)", top>>20, rssBound>>20, start>>20)
	}
	drainAfterDisconnects(t, p, base)
}

type abuseCase struct {
	name string
	run  func(t *testing.T)
}

func abuseCases(base string) []abuseCase {
	completion := func(extra string) string {
		return jsonPost("/v1/completions", `{"model":"`+model+`",`+extra+`}`)
	}
	simple := func(name, raw, method string, status int) abuseCase {
		return abuseCase{name, func(t *testing.T) { h := dialHostile(t, base); h.send(raw); h.expectStatus(t, method, status) }}
	}
	return []abuseCase{
		{"pipelined flood behind a stream", func(t *testing.T) { pipelinedFlood(t, base) }},
		{"trailer floods", func(t *testing.T) { trailerFloods(t, base, 6) }},
		{"endless header", func(t *testing.T) {
			h := dialHostile(t, base)
			go h.send("GET /health HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 4<<20))
			h.expectStatus(t, "GET", 431)
		}},
		{"body dribbled a byte at a time", func(t *testing.T) {
			h := dialHostile(t, base)
			h.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: bearer k1\r\nContent-Length: 32768\r\n\r\n")
			for range 32768 {
				h.send("x")
			}
			h.expectStatus(t, "POST", 400)
		}},
		{"slowloris", func(t *testing.T) {
			h := dialHostile(t, base)
			h.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
			h.expectStatus(t, "POST", 408)
		}},
		simple("header injection", "GET /health HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\nSet-Cookie: s=1\r\n\r\n", "GET", 400),
		simple("no Host", "GET /health HTTP/1.1\r\n\r\n", "GET", 400),
		simple("signed Content-Length", "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}", "POST", 400),
		simple("DELETE /health", "DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n", "DELETE", 405),
		simple("no API key", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "POST", 401),
		simple("too many stop_token_ids", completion(`"prompt":"x","stop_token_ids":`+tokenIDs(2000)), "POST", 400),
		simple("prompt over the context", completion(`"prompt":`+tokenIDs(5000)+`,"max_tokens":1`), "POST", 400),
		simple("prompt and max_tokens over the context", completion(`"prompt":`+tokenIDs(4000)+`,"max_tokens":200`), "POST", 400),
		simple("4 MB text prompt", completion(`"prompt":"`+strings.Repeat("many words ", 400_000)+`"`), "POST", 400),
		simple("tools of the wrong type", jsonPost("/v1/chat/completions", `{"model":"`+model+`","tools":"f","messages":[{"role":"user","content":"x"}]}`), "POST", 400),
		simple("system of the wrong type", jsonPost("/v1/messages", `{"model":"`+model+`","max_tokens":1,"system":5,"messages":[{"role":"user","content":"x"}]}`), "POST", 400),
		simple("a prompt that fills the context exactly", completion(`"prompt":`+tokenIDs(4095)+`,"max_tokens":1`), "POST", 200),
		{"HEAD sends no body", func(t *testing.T) {
			h := dialHostile(t, base)
			h.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			h.expectStatus(t, "HEAD", 200)
			if body := h.expectStatus(t, "GET", 200); body != `{"status":"ok"}` {
				t.Fatalf("after HEAD: %q", body)
			}
		}},
		{"tokenize answer larger than max-pending-write", func(t *testing.T) {
			h := dialHostile(t, base)
			h.send(jsonPost("/tokenize", `{"prompt":"`+strings.Repeat("tokens and more tokens ", 20_000)+`"}`))
			var out struct{ Tokens []int }
			body := h.expectStatus(t, "POST", 200)
			if err := json.Unmarshal([]byte(body), &out); err != nil || len(body) <= 65536 || len(out.Tokens) < 60_000 {
				t.Fatalf("%d bytes, %d tokens: %v", len(body), len(out.Tokens), err)
			}
		}},
	}
}

// goodStream runs one streamed chat completion to its end.
func goodStream(base, content string) error {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 16, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": content}}})
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return fmt.Errorf("status %d, %v: %.200s", resp.StatusCode, err, body)
	}
	if s := strings.TrimSpace(string(body)); !strings.HasSuffix(s, "data: [DONE]") {
		return fmt.Errorf("stream did not complete: %.300s", s[max(0, len(s)-300):])
	}
	if ev := sseError(body); ev != "" {
		return fmt.Errorf("stream failed: %.300s", ev)
	}
	return nil
}

// pipelinedFlood: behind a long stream, a request with a 100 MB body is
// pipelined. kvgate does not read it while the stream runs (the client's
// writes block after what the socket buffers hold), and once the stream
// ends answers it 413.
func pipelinedFlood(t *testing.T, base string) {
	h := dialHostile(t, base)
	h.send(jsonPost("/v1/completions", `{"model":"`+model+`","prompt":"a long one","max_tokens":600,"ignore_eos":true,"stream":true}`) +
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
	var written atomic.Int64
	go func() {
		piece := bytes.Repeat([]byte("x"), 1<<20)
		for written.Load() < 100_000_000 {
			n, err := h.c.Write(piece)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	read := make(chan error, 1)
	go func() {
		resp, err := http.ReadResponse(h.br, &http.Request{Method: "POST"})
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		read <- err
	}()
	last, since := int64(-1), time.Now()
	for time.Since(since) < time.Second {
		if n := written.Load(); n != last {
			last, since = n, time.Now()
		}
		time.Sleep(10 * time.Millisecond) // the poll interval
	}
	t.Logf("the client wrote %d MB ahead of a stream in service", written.Load()>>20)
	if written.Load() > 64<<20 {
		t.Fatalf("kvgate read %d MB pipelined behind a stream", written.Load()>>20)
	}
	if err := <-read; err != nil {
		t.Fatalf("the stream: %v", err)
	}
	h.expectStatus(t, "POST", 413)
}

// trailerFloods: n connections send a chunked body whose trailer never
// ends, before any API key is checked; each gets 431.
func trailerFloods(t *testing.T, base string, n int) {
	var wg sync.WaitGroup
	for range n {
		h := dialHostile(t, base)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n")
			line := "X-Trailer: " + strings.Repeat("t", 1000) + "\r\n"
			for range 4096 { // 4 MB of trailer, unless cut off first
				if _, err := io.WriteString(h.c, line); err != nil {
					return
				}
			}
		}()
		defer func() { h.expectStatus(t, "POST", 431) }()
	}
	wg.Wait()
}

// drainAfterDisconnects: clients leave twenty streams after their first
// event; then, with one real stream running, SIGTERM lets that stream
// complete and kvgate exits right after it, not at the drain deadline.
func drainAfterDisconnects(t *testing.T, p *proc, base string) {
	for range 20 {
		h := dialHostile(t, base)
		h.send(jsonPost("/v1/completions", `{"model":"`+model+`","prompt":"leave me","max_tokens":1000,"ignore_eos":true,"stream":true}`))
		if line, err := h.br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("stream to leave: %q %v", line, err)
		}
		h.c.Close()
	}
	done := make(chan error, 1)
	underway := make(chan struct{})
	go func() {
		h := dialHostile(t, base)
		h.send(jsonPost("/v1/completions", `{"model":"`+model+`","prompt":"drain me","max_tokens":40,"ignore_eos":true,"stream":true}`))
		resp, err := http.ReadResponse(h.br, &http.Request{Method: "POST"})
		close(underway)
		if err != nil {
			done <- err
			return
		}
		body, _ := io.ReadAll(bufio.NewReader(resp.Body))
		if !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
			err = fmt.Errorf("stream cut by the drain: %.200s", body)
		}
		done <- err
	}()
	<-underway
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if took := time.Since(sent); took > 30*time.Second {
		t.Fatalf("kvgate took %v to exit after SIGTERM (drain timeout 60s): a request that ended was still counted in flight", took)
	} else {
		t.Logf("kvgate exited %v after SIGTERM", took.Round(time.Millisecond))
	}
}
