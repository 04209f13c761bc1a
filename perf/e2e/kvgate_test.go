//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

const model = "Qwen/Qwen3-8B"

// admins maps a kvgate's base URL to its admin URL.
var admins = map[string]string{}

// startKvgate runs kvgate on free ports and returns its base URL.
func startKvgate(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, "kvgate", append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...)...)
	line := p.waitLog(t, "kvgate listening")
	base := "http://" + line["addr"].(string)
	admins[base] = "http://" + line["admin"].(string)
	return p, base
}

func post(t *testing.T, url string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// sseEvents reads a text/event-stream body into its data payloads.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	return data
}

func TestOpenAIAndAnthropic(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "2", "--sim-profile", "zero")
	// Non-streaming completion.
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "Hello", "max_tokens": 5, "ignore_eos": true})
	var comp struct {
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &comp); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if comp.Object != "text_completion" || comp.Choices[0].FinishReason != "length" || comp.Usage.CompletionTokens != 5 {
		t.Fatalf("completion: %s", body)
	}
	if resp.Header.Get("x-kvgate-engine") == "" || resp.Header.Get("x-request-id") == "" {
		t.Fatalf("headers: %v", resp.Header)
	}
	// Streaming chat with usage.
	resp, body = post(t, base+"/v1/chat/completions", map[string]any{"model": model, "stream": true, "max_tokens": 4, "ignore_eos": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}}}})
	events := sseEvents(t, body)
	if resp.Header.Get("Content-Type") != "text/event-stream" || events[len(events)-1] != "[DONE]" ||
		!strings.Contains(events[len(events)-2], `"usage"`) || !strings.Contains(events[0], `"role":"assistant"`) {
		t.Fatalf("chat stream: %q", events)
	}
	// Anthropic, streamed: the event sequence of the Messages API.
	resp, body = post(t, base+"/v1/messages", map[string]any{"model": model, "max_tokens": 3, "stream": true,
		"system": "terse", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	var kinds []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "event: ") {
			kinds = append(kinds, strings.TrimPrefix(line, "event: "))
		}
	}
	// Deltas may be absent: a sampled EOS as the first token (1 in 256 for
	// the simulator) gives an empty answer, which the API allows.
	seq := strings.Join(kinds, " ")
	middle := strings.TrimSuffix(strings.TrimPrefix(seq, "message_start content_block_start ping"),
		"content_block_stop message_delta message_stop")
	if !strings.HasPrefix(seq, "message_start content_block_start ping") ||
		!strings.HasSuffix(seq, "content_block_stop message_delta message_stop") ||
		strings.Trim(strings.ReplaceAll(middle, "content_block_delta", ""), " ") != "" {
		t.Fatalf("anthropic events: %v", kinds)
	}
	// Errors in each API's own shape.
	resp, body = post(t, base+"/v1/chat/completions", map[string]any{"model": "no-such-model", "messages": []any{}})
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/v1/messages", map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "max_tokens") {
		t.Fatalf("anthropic missing max_tokens: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/v1/chat/completions", map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "temperature": 9})
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"param":"temperature"`) {
		t.Fatalf("bad temperature: %d %s", resp.StatusCode, body)
	}
	r, err := http.Get(base + "/v1/completions")
	if err != nil || r.StatusCode != 405 {
		t.Fatalf("GET completions: %v %v", r.StatusCode, err)
	}
	r.Body.Close()
}

// TestMultiTurnStaysOnItsEngine: later turns of a conversation go to the
// engine that holds its prefix and report it as cached.
func TestMultiTurnStaysOnItsEngine(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "4", "--sim-profile", "zero")
	system := strings.Repeat("You are a meticulous code reviewer. ", 60)
	msgs := []any{map[string]any{"role": "system", "content": system}}
	var engineID string
	for turn := range 4 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d: review this", turn)})
		resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": model, "messages": msgs, "max_tokens": 8, "ignore_eos": true})
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, body)
		}
		got := resp.Header.Get("x-kvgate-engine")
		if turn == 0 {
			engineID = got
		} else {
			if got != engineID {
				t.Fatalf("turn %d went to %s, the prefix is on %s", turn, got, engineID)
			}
			if out.Usage.Details.Cached < out.Usage.PromptTokens/2 {
				t.Fatalf("turn %d: %d of %d prompt tokens cached", turn, out.Usage.Details.Cached, out.Usage.PromptTokens)
			}
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": out.Choices[0].Message.Content})
	}
}

// rawHTTP sends raw bytes and returns the server's first answer (or all it
// sends until it closes, with untilClose).
func rawHTTP(t *testing.T, base, payload string, untilClose ...bool) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
		if len(untilClose) == 0 && strings.Contains(out.String(), "\r\n\r\n") && strings.Contains(out.String(), "}") {
			return out.String()
		}
	}
}

func TestMalformedAndOversized(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero", "--max-body-bytes", "4096")
	cases := map[string]struct{ payload, want string }{
		"garbage request line": {"HELLO\r\n\r\n", "400"},
		"bad version":          {"GET /health HTTP/9.9\r\n\r\n", "505"},
		"bad content-length":   {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", "400"},
		"oversized body":       {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "413"},
		"header too large":     {"GET /health HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 70000) + "\r\n\r\n", "431"},
		"malformed JSON":       {"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad}", "400"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := rawHTTP(t, base, c.payload)
			if !strings.HasPrefix(got, "HTTP/1.1 "+c.want) {
				t.Fatalf("got %q", got[:min(len(got), 120)])
			}
		})
	}
	// Pipelined requests on one connection, a chunked body among them,
	// answered in order.
	got := rawHTTP(t, base, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pro\r\n10\r\nmpt\":\"hi there\"}\r\n0\r\n\r\n"+
		"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true)
	first, second := strings.Index(got, `{"status":"ok"}`), strings.Index(got, `"count":2`)
	if first < 0 || second < first || strings.Count(got, "HTTP/1.1 200") != 3 {
		t.Fatalf("pipelined answers: %q", got)
	}
	// The daemon still serves after all of that.
	resp, _ := post(t, base+"/tokenize", map[string]any{"prompt": "ok"})
	if resp.StatusCode != 200 {
		t.Fatalf("after bad input: %d", resp.StatusCode)
	}
}

// TestDrainOnSIGTERM: a stream in flight when SIGTERM arrives completes, and
// kvgate exits 0.
func TestDrainOnSIGTERM(t *testing.T) {
	p, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "default", "--sim-speed", "1")
	done := make(chan []byte, 1)
	underway := make(chan struct{}) // closed at the stream's first event
	go func() {
		defer close(done)
		b, _ := json.Marshal(map[string]any{"model": model, "prompt": "drain me", "max_tokens": 40, "ignore_eos": true, "stream": true})
		resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			close(underway)
			return
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var out []byte
		for {
			line, err := r.ReadBytes('\n')
			out = append(out, line...)
			if bytes.HasPrefix(line, []byte("data: ")) || err != nil {
				break
			}
		}
		close(underway)
		rest, _ := io.ReadAll(r)
		done <- append(out, rest...)
	}()
	select {
	case <-underway: // 40 decode steps of >= 6 ms: the stream is far from done
	case <-time.After(60 * time.Second):
		t.Fatal("the stream did not start within a minute")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if !strings.HasSuffix(strings.TrimSpace(string(out)), "data: [DONE]") {
		t.Fatalf("stream cut by the drain: %q", out)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// usage is the usage object of an OpenAI response, with the cached prompt
// tokens the engine reported.
type usage struct {
	PromptTokens int `json:"prompt_tokens"`
	Details      struct {
		Cached int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}
