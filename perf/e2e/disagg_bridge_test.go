//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestDisaggBridge is issue 23's point 4 through the processes: kvgate in
// front of a kvgate-bridge --role prefill and a kvgate-bridge --role
// decode, each in front of a NIXL fake vLLM (the decode one reading its
// KV from the prefill one). While the decode engine runs a decode batch,
// a streamed chat with a long uncached prompt is split: exactly
// max_tokens tokens in one stream, the first from the prefill vLLM, the
// rest from the decode vLLM, which got the prefill's kv_transfer_params;
// the response names both engines.
func TestDisaggBridge(t *testing.T) {
	const maxTokens = 24
	pf, err := vllmtest.Start(model, 16, 100000, vllmtest.Tagged, vllmtest.WithNIXL(vllmtest.KVProducer, "vllm-p", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	df, err := vllmtest.Start(model, 16, 100000, vllmtest.Tagged, vllmtest.WithNIXL(vllmtest.KVConsumer, "vllm-d", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	df.ReadFrom(pf)
	bridge := func(f *vllmtest.Fake, id, role string) string {
		p := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
			"--model", model, "--block-size", "16", "--id", id, "--role", role, "--metrics-interval", "50ms")
		return p.waitLog(t, "bridge serving")["addr"].(string)
	}
	paddr, daddr := bridge(pf, "prefill-0", "prefill"), bridge(df, "decode-0", "decode")
	_, base := startKvgate(t, "--engine", paddr+","+daddr)
	waitReady(t, base)

	// A decode batch on the decode engine: short prompts generating long.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range 4 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":%q,"prompt":[%d,2,3],"max_tokens":100000,"ignore_eos":true,"stream":true}`, model, 100+i)
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
			}
		})
	}
	salt := 0
	resp, body := splitChat(t, base, &salt, maxTokens)
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-prefill-engine") != "prefill-0" || resp.Header.Get("x-kvgate-engine") != "decode-0" {
		t.Fatalf("%d, engines %q/%q: %s", resp.StatusCode, resp.Header.Get("x-kvgate-prefill-engine"), resp.Header.Get("x-kvgate-engine"), body)
	}
	tokens, completion, errs, done := chatEvents(t, body)
	if !done || len(errs) > 0 || tokens != maxTokens || completion != maxTokens {
		t.Fatalf("split stream: %d tokens, usage %d, want %d: %s", tokens, completion, maxTokens, body)
	}
	// The decode vLLM read the KV the prefill vLLM kept: the hand-off
	// went through the connector, not around it.
	if df.Reads() < 1 || pf.Held() != 0 {
		t.Fatalf("decode vLLM read %d transfers; the prefill vLLM still holds %d", df.Reads(), pf.Held())
	}
	// A transfer that fails after the first token went out ends the
	// client's stream with a well-formed in-stream error: the decode vLLM
	// refusing the transfer, or dying mid-stream.
	for _, fault := range []vllmtest.NIXLFault{{Status: 400}, {DieAfter: 3}} {
		df.SetNIXLFault(fault)
		resp, body := splitChat(t, base, &salt, maxTokens)
		tokens, _, errs, _ := chatEvents(t, body)
		if resp.StatusCode != 200 || len(errs) != 1 || tokens >= maxTokens {
			t.Fatalf("fault %+v: %d, %d tokens, errors %v: %s", fault, resp.StatusCode, tokens, errs, body)
		}
		t.Logf("fault %+v: %d tokens, then %q", fault, tokens, errs)
	}
}

// splitChat posts streamed chats with a long prompt of a new salt each
// until one is split, and returns it.
func splitChat(t *testing.T, base string, salt *int, maxTokens int) (resp *http.Response, body []byte) {
	t.Helper()
	checkFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		*salt++
		text := fmt.Sprintf("Conversation %d. %s", *salt, strings.Repeat(fmt.Sprintf("Prefill on one engine, decode on another, turn %d. ", *salt), 300))
		resp, body = post(t, base+"/v1/chat/completions", map[string]any{"model": model, "max_tokens": maxTokens, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": text}}, "logprobs": true,
			"stream_options": map[string]any{"include_usage": true}})
		if resp.Header.Get("x-kvgate-prefill-engine") == "" {
			return fmt.Errorf("chat %d served aggregated on %s (%d)", *salt, resp.Header.Get("x-kvgate-engine"), resp.StatusCode)
		}
		return nil
	})
	return resp, body
}

// chatEvents reads a streamed chat: its tokens (logprobs entries), the
// usage's completion tokens, the messages of its error events, and
// whether it ended in [DONE]; an event that is not JSON fails the test.
func chatEvents(t *testing.T, body []byte) (tokens, completion int, errs []string, done bool) {
	t.Helper()
	for _, d := range sseEvents(t, body) {
		if d == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Logprobs *struct {
					Content []json.RawMessage `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage *struct {
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		if ev.Error != nil {
			if ev.Error.Message == "" {
				t.Fatalf("error event without a message: %s", d)
			}
			errs = append(errs, ev.Error.Message)
		}
		for _, c := range ev.Choices {
			if c.Logprobs != nil {
				tokens += len(c.Logprobs.Content)
			}
		}
		if ev.Usage != nil {
			completion = ev.Usage.Completion
		}
	}
	return tokens, completion, errs, done
}
