//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
)

// TestBridgeToFakeVLLM: kvgate -> kvgate-bridge -> a fake vLLM (HTTP and
// ZMQ KV events, newer encoding). A streamed completion goes through with a
// token-id prompt; the engine's events fill kvgate's index; a repeated
// prefix is reported cached; evictions (BlockRemoved with engine hashes)
// leave the index; a batch missed on the PUB socket is replayed. After
// each phase the index holds the engine's blocks, hash for hash.
func TestBridgeToFakeVLLM(t *testing.T) {
	for _, enc := range []vllmtest.Encoding{vllmtest.Tagged, vllmtest.Positional} {
		t.Run(fmt.Sprint(enc), func(t *testing.T) { bridgeScenario(t, enc) })
	}
}

func bridgeScenario(t *testing.T, enc vllmtest.Encoding) {
	f, err := vllmtest.Start(model, 16, 48, enc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
		"--kv-events", f.EventsURL, "--replay", f.ReplayURL, "--model", model, "--block-size", "16", "--id", "vllm-0",
		"--metrics-interval", "100ms")
	line := br.waitLog(t, "bridge serving")
	addr, bridgeAdmin := line["addr"].(string), "http://"+line["admin"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	admin := adminOf(t, base)

	text := func(i int) string {
		return fmt.Sprintf("Conversation %d. %s", i, strings.Repeat("The bridge carries token ids to an unmodified engine. ", 12))
	}
	// Streamed, through kvgate and the bridge.
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": text(0), "max_tokens": 5, "stream": true})
	events := sseEvents(t, body)
	if resp.StatusCode != 200 || len(events) < 2 || events[len(events)-1] != "[DONE]" || resp.Header.Get("x-kvgate-engine") != "vllm-0" {
		t.Fatalf("streamed completion: %d %q", resp.StatusCode, body)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || len(reqs[0].Prompt) < 100 || reqs[0].Body["return_token_ids"] != true || reqs[0].Body["stream"] != true {
		t.Fatalf("the engine got %+v", reqs)
	}
	// The engine's events reach the index (PUB drops what precedes the
	// subscription, so wait for the blocks of a request sent now).
	i := 1
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if indexBlocks(t, admin) > 0 {
			return nil
		}
		complete(t, base, text(i), 1)
		i++
		return fmt.Errorf("no KV event reached kvgate's index after %d completions", i-1)
	})
	waitIndex(t, admin, addr, f)

	// The same prefix again: the engine serves it from cache and says so.
	_, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": text(0) + " Again.", "max_tokens": 2})
	var out struct {
		Usage usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Usage.Details.Cached < 64 {
		t.Fatalf("repeated prefix: cached %d (%v): %s", out.Usage.Details.Cached, err, body)
	}

	// Fill the 48-block cache past capacity: evictions come as BlockRemoved
	// with engine hashes and must leave kvgate's index.
	for i := 10; i < 18; i++ {
		complete(t, base, text(i), 1)
	}
	if f.Blocks() != 48 {
		t.Fatalf("fake holds %d blocks, want a full cache of 48", f.Blocks())
	}
	waitIndex(t, admin, addr, f)

	// A batch lost on the PUB socket: the next batch shows the gap and the
	// bridge replays the missing one.
	f.DropNext(1, false)
	complete(t, base, text(30), 1)
	complete(t, base, text(31), 1)
	waitIndex(t, admin, addr, f)
	waitMetric(t, bridgeAdmin, "kvgate_bridge_event_batches_replayed_total ", " 1")

	// Lost for good (not in the replay buffer): the bridge tells kvgate to
	// forget the rank, and the index refills from the next events.
	f.DropNext(1, true)
	complete(t, base, text(40), 1)
	complete(t, base, text(41), 1)
	waitMetric(t, bridgeAdmin, "kvgate_bridge_event_gaps_total ", " 2")
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if n := indexBlocks(t, admin); n == 0 || n >= f.Blocks() {
			return fmt.Errorf("after a loss the index holds %d of the engine's %d blocks: it should have forgotten them and refilled", n, f.Blocks())
		}
		return nil
	})
}

func complete(t *testing.T, base, prompt string, maxTokens int) {
	t.Helper()
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens})
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %d %s", resp.StatusCode, body)
	}
}

// waitIndex waits until kvgate's index of the engine at addr holds the
// engine's blocks: the same hashes, not only as many (bridge_sets_test.go).
func waitIndex(t *testing.T, admin, addr string, f *vllmtest.Fake) {
	t.Helper()
	waitSet(t, admin, addr, f, nil, nil)
}

// indexBlocks is the blocks kvgate's index holds, all engines and tiers,
// from /debug/state (live counts: a cleared tier counts 0 at once, while
// its table entries wait for the sweep).
func indexBlocks(t *testing.T, admin string) int {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Index struct {
			Engines []struct {
				Blocks []int
			} `json:"engines"`
		} `json:"index"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range st.Index.Engines {
		for _, b := range e.Blocks {
			n += b
		}
	}
	return n
}

// TestBridgeAnnouncesVLLMContext: the bridge reads the engine's context
// from vLLM's /v1/models (max_model_len) and announces it, so kvgate
// answers a prompt the engine cannot take with a 400 naming it, and
// serves one that fits.
func TestBridgeAnnouncesVLLMContext(t *testing.T) {
	f, err := vllmtest.Start(model, 16, 48, vllmtest.Tagged, vllmtest.WithMaxModelLen(512))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := start(t, "kvgate-bridge", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--engine-url", f.URL,
		"--model", model, "--block-size", "16", "--id", "vllm-ctx")
	line := br.waitLog(t, "bridge serving")
	_, base := startKvgate(t, "--engine", line["addr"].(string))
	waitReady(t, base)
	ids := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 100 + i
		}
		return out
	}
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": ids(512), "max_tokens": 1})
	if resp.StatusCode != 400 || !strings.Contains(string(body), "maximum context length is 512 tokens") {
		t.Fatalf("a prompt of the whole context: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": ids(500), "max_tokens": 12})
	if resp.StatusCode != 200 {
		t.Fatalf("a prompt that fits: %d %s", resp.StatusCode, body)
	}
	if n := len(f.Requests()); n != 1 {
		t.Fatalf("the engine got %d requests, want only the one that fits", n)
	}
}
