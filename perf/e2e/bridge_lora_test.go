//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestBridgeLoadsLoRAOnVLLM: kvgate -> kvgate-bridge --lora-adapter ->
// a fake vLLM with the runtime adapter API and 2 slots. Three adapters
// requested in turn are each loaded when first needed, the least recently
// used unloaded for the third; kvgate learns each change (ADAPTERS) and
// reports it in its metrics; an adapter whose path vLLM finds empty is a
// clear error for the client, with vLLM's message, not a hang.
func TestBridgeLoadsLoRAOnVLLM(t *testing.T) {
	f, err := vllmtest.Start(model, 16, 256, vllmtest.Tagged, vllmtest.WithRuntimeLoRA(10*time.Millisecond, "/ad/a", "/ad/b", "/ad/c"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
		"--model", model, "--block-size", "16", "--id", "vllm-lora", "--max-loras", "2",
		"--lora-adapter", "a=/ad/a", "--lora-adapter", "b=/ad/b", "--lora-adapter", "c=/ad/c", "--lora-adapter", "gone=/ad/missing")
	line := br.waitLog(t, "bridge serving")
	_, base := startKvgate(t, "--engine", line["addr"].(string))
	waitReady(t, base)
	bridgeAdmin := "http://" + line["admin"].(string)
	for _, m := range []string{"a", "b", "a", "c"} {
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": m, "prompt": strings.Repeat("the adapter prompt ", 20), "max_tokens": 3})
		if resp.StatusCode != 200 {
			t.Fatalf("adapter %s: %d %s", m, resp.StatusCode, body)
		}
		checkFor(t, 20*time.Second, 5*time.Millisecond, func() error { // the response ends before the bridge's hold on the adapter
			if v := strings.TrimSpace(metricValue(bridgeAdmin, "kvgate_bridge_lora_in_use ")); v != "0" {
				return fmt.Errorf("%q requests hold an adapter", v)
			}
			return nil
		})
	}
	var calls []string
	for _, c := range f.LoRACalls() {
		calls = append(calls, fmt.Sprintf("%s %s %d", c.Op, c.Name, c.Status))
		if c.Registered > 2 {
			t.Fatalf("the engine held %d adapters, over its 2 slots", c.Registered)
		}
	}
	if got, want := strings.Join(calls, ","), "load a 200,load b 200,unload b 200,load c 200"; got != want {
		t.Fatalf("adapter calls %q, want %q", got, want)
	}
	admin := admins[base]
	checkFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if v := metricValue(admin, `kvgate_lora_resident{adapter="c"`); v == "" {
			return fmt.Errorf("kvgate does not report c resident")
		}
		if v := metricValue(admin, `kvgate_lora_resident{adapter="b"`); v != "" {
			return fmt.Errorf("kvgate reports b, evicted, resident")
		}
		if v := strings.TrimSpace(metricValue(admin, `kvgate_lora_evictions_total{`)); !strings.HasSuffix(v, " 1") {
			return fmt.Errorf("evictions %q", v)
		}
		return nil
	})
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": "gone", "prompt": "x y z", "max_tokens": 3})
	if resp.StatusCode < 400 || !strings.Contains(string(body), "No adapter found for /ad/missing") {
		t.Fatalf("an adapter vLLM cannot load: %d %s", resp.StatusCode, body)
	}
}
