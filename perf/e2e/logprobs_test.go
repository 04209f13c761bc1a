//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestSDKLogprobs reads logprobs through the official OpenAI Node SDK
// (sdk/logprobs.mjs): chat's logprobs.content, whole and assembled by the
// streaming helper, completions' tokens and top_logprobs, streamed and
// whole, from kvgate-sim's deterministic sampler over the wire protocol's
// sampling section; n choices; and the 400s naming top_logprobs, best_of
// and, for Anthropic, logprobs.
func TestSDKLogprobs(t *testing.T) {
	runSDKScript(t, "logprobs.mjs")
}

// TestBridgeLogprobs: kvgate -> kvgate-bridge -> a fake vLLM. The sampling
// fields reach vLLM's /v1/completions by its names, and the logprobs it
// streams come back to the client as OpenAI's completions logprobs.
func TestBridgeLogprobs(t *testing.T) {
	f, err := vllmtest.Start(model, 16, 48, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
		"--kv-events", f.EventsURL, "--replay", f.ReplayURL, "--model", model, "--block-size", "16", "--id", "vllm-0")
	addr := br.waitLog(t, "bridge serving")["addr"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)

	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": "Hello there", "max_tokens": 4,
		"logprobs": 2, "presence_penalty": 0.5, "min_tokens": 1, "logit_bias": map[string]float64{"13": -5}})
	var out struct {
		Choices []struct {
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	lp := out.Choices[0].Logprobs
	if len(lp.Tokens) != 4 || len(lp.TokenLogprobs) != 4 || len(lp.TopLogprobs) != 4 {
		t.Fatalf("logprobs %+v", lp)
	}
	for i, v := range lp.TokenLogprobs {
		if v != float64(vllmtest.FakeLogprob(0)) || len(lp.TopLogprobs[i]) < 2 {
			t.Fatalf("token %d: logprob %v, top %v", i, v, lp.TopLogprobs[i])
		}
	}
	b := f.Requests()[len(f.Requests())-1].Body
	if b["logprobs"] != 2.0 || b["return_tokens_as_token_ids"] != true || b["presence_penalty"] != 0.5 || b["min_tokens"] != 1.0 ||
		b["logit_bias"].(map[string]any)["13"] != -5.0 {
		t.Fatalf("the engine got %v", b)
	}
}
