//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/dataplane/tokenize"
	"github.com/kvgate/kvgate/perf/llamacpp"
	"github.com/kvgate/kvgate/perf/llamacpp/llamacpptest"
)

// startLlamaBridge runs kvgate-bridge --engine-kind llamacpp in front of
// the llama-server at url and returns its wire address.
func startLlamaBridge(t *testing.T, url string, args ...string) string {
	t.Helper()
	br := start(t, "kvgate-bridge", append([]string{"--engine-kind", "llamacpp", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--engine-url", url, "--model", model, "--block-size", "16", "--id", "llama-0", "--slots-interval", "100ms",
		"--metrics-interval", "100ms"}, args...)...)
	return br.waitLog(t, "bridge serving")["addr"].(string)
}

// TestBridgeToLlamaCpp: kvgate -> kvgate-bridge --engine-kind llamacpp ->
// a real llama-server. A greedy completion, streamed and not, gives the
// text llama.cpp gives when asked directly for the same prompt ids; the
// bridge's /slots-derived KV events fill kvgate's index; a repeated
// prompt is served from llama.cpp's cache and said so.
func TestBridgeToLlamaCpp(t *testing.T) {
	srv := llamacpptest.Start(t, llamacpp.Config{Parallel: 2, CtxSize: 8192, Args: []string{"--alias", model}})
	_, base := startKvgate(t, "--engine", startLlamaBridge(t, srv.URL))
	waitReady(t, base)
	tok, err := tokenize.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	prompt := "The router sends each prompt to the engine that holds its prefix. " + strings.Repeat("Blocks of sixteen tokens. ", 8)
	direct := llamaComplete(t, srv.URL, tok.Encode(nil, prompt, false), 8)

	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": true})
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("completion: %d %v %s", resp.StatusCode, err, body)
	}
	if out.Choices[0].Text != direct.Content || out.Choices[0].Text == "" || resp.Header.Get("x-kvgate-engine") != "llama-0" {
		t.Fatalf("through kvgate %q, llama.cpp directly %q", out.Choices[0].Text, direct.Content)
	}
	if out.Usage.Details.Cached < out.Usage.PromptTokens-1 {
		t.Errorf("the prompt asked directly first is not reported cached: %+v", out.Usage)
	}

	resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": 8, "temperature": 0,
		"ignore_eos": true, "stream": true})
	var text strings.Builder
	for _, ev := range sseEvents(t, body) {
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev), &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Text)
		}
	}
	if resp.StatusCode != 200 || text.String() != direct.Content {
		t.Fatalf("streamed through kvgate %q (%d), llama.cpp directly %q", text.String(), resp.StatusCode, direct.Content)
	}

	admin := adminOf(t, base)
	checkFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := indexBlocks(t, admin); n < len(tok.Encode(nil, prompt, false))/16 {
			return fmt.Errorf("kvgate's index holds %d blocks of the llama.cpp engine", n)
		}
		return nil
	})

	// The bridge announces one slot's context (8192 over 2 slots), and
	// kvgate holds prompts to it before llama.cpp sees them.
	long := make([]int, 4096)
	for i := range long {
		long[i] = 100 + i%1000
	}
	resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": long, "max_tokens": 1})
	if resp.StatusCode != 400 || !strings.Contains(string(body), "maximum context length is 4096 tokens") {
		t.Fatalf("a prompt of the whole slot context: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": long[:4000], "max_tokens": 200})
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"param":"max_tokens"`) {
		t.Fatalf("prompt plus max_tokens over the slot context: %d %s", resp.StatusCode, body)
	}
}

// TestBridgeLlamaCppRefusals: a server that is not what the flags say is
// refused at connect: the bridge logs what differs and exits 1 without
// serving, for another model, a vLLM server under --engine-kind llamacpp,
// and llama.cpp under --engine-kind vllm.
func TestBridgeLlamaCppRefusals(t *testing.T) {
	srv := llamacpptest.Start(t, llamacpp.Config{Args: []string{"--alias", model}})
	fake, err := vllmtest.Start(model, 16, 48, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"model", []string{"--engine-kind", "llamacpp", "--engine-url", srv.URL, "--model", "other/model"}, `--model is \"other/model\"`},
		{"vllm-as-llamacpp", []string{"--engine-kind", "llamacpp", "--engine-url", fake.URL, "--model", model}, "not a llama.cpp server"},
		{"llamacpp-as-vllm", []string{"--engine-url", srv.URL, "--model", model}, "--engine-kind llamacpp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := start(t, "kvgate-bridge", append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--connect-timeout", "20s"}, c.args...)...)
			line := br.waitLog(t, "engine refused")
			if b, _ := json.Marshal(line); !strings.Contains(string(b), c.says) {
				t.Fatalf("refusal %s does not say %q", b, c.says)
			}
			if err := br.wait(t); err == nil || !strings.Contains(err.Error(), "exit status 1") {
				t.Fatalf("exit: %v", err)
			}
		})
	}
}
