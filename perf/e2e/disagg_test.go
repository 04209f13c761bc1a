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
)

// TestDisaggregated is issue 23 through the processes: kvgate in front of
// a kvgate-sim --role prefill and a kvgate-sim --role decode. While the
// decode engine runs a decode batch, a long uncached prompt is prefilled
// on the prefill engine and decoded on the decode engine: one stream of
// exactly max_tokens tokens, both engines named. The decode engine
// announced the transferred blocks, so the next turn of that prompt is
// served from its cache, aggregated.
func TestDisaggregated(t *testing.T) {
	const promptLen, maxTokens = 4096, 24
	common := []string{"--listen", "127.0.0.1:0", "--model", model, "--profile", "default", "--speed", "5", "--load-interval", "5ms"}
	pre := start(t, "kvgate-sim", append(common, "--id", "prefill-0", "--role", "prefill")...)
	dec := start(t, "kvgate-sim", append(common, "--id", "decode-0", "--role", "decode")...)
	paddr := pre.waitLog(t, "serving")["addr"].(string)
	daddr := dec.waitLog(t, "serving")["addr"].(string)
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
			if resp.StatusCode != 200 {
				t.Errorf("busy request %d: %d", i, resp.StatusCode)
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
			}
		})
	}
	prompt := func(salt int) []uint32 {
		p := make([]uint32, promptLen)
		for j := range p {
			p[j] = uint32((salt*promptLen+j)*7919%150000 + 1)
		}
		return p
	}
	var split []uint32
	var resp *http.Response
	var body []byte
	salt := 0
	checkFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		salt++
		split = prompt(salt)
		resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": split, "max_tokens": maxTokens,
			"ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}, "logprobs": 1})
		if resp.Header.Get("x-kvgate-prefill-engine") == "" {
			return fmt.Errorf("prompt %d served aggregated on %s", salt, resp.Header.Get("x-kvgate-engine"))
		}
		return nil
	})
	if resp.StatusCode != 200 || resp.Header.Get("x-kvgate-prefill-engine") != "prefill-0" || resp.Header.Get("x-kvgate-engine") != "decode-0" {
		t.Fatalf("%d, engines %q/%q: %s", resp.StatusCode, resp.Header.Get("x-kvgate-prefill-engine"), resp.Header.Get("x-kvgate-engine"), body)
	}
	tokens, completion := 0, 0
	for _, d := range sseEvents(t, body) {
		var ev struct {
			Choices []struct {
				Logprobs *struct {
					Tokens []string `json:"tokens"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage *struct {
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if d == "[DONE]" || json.Unmarshal([]byte(d), &ev) != nil {
			continue
		}
		for _, c := range ev.Choices {
			if c.Logprobs != nil {
				tokens += len(c.Logprobs.Tokens)
			}
		}
		if ev.Usage != nil {
			completion = ev.Usage.Completion
		}
	}
	if tokens != maxTokens || completion != maxTokens {
		t.Fatalf("split stream: %d tokens, usage %d, want %d: %s", tokens, completion, maxTokens, body)
	}
	// The next turn finds the transferred prefix on the decode engine.
	checkFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": split, "max_tokens": 2})
		var r struct {
			Usage usage `json:"usage"`
		}
		if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		if e := resp.Header.Get("x-kvgate-engine"); e != "decode-0" || resp.Header.Get("x-kvgate-prefill-engine") != "" ||
			r.Usage.Details.Cached < promptLen-16 {
			return fmt.Errorf("next turn on %s (prefill %q), %d cached", e, resp.Header.Get("x-kvgate-prefill-engine"), r.Usage.Details.Cached)
		}
		return nil
	})
}
