//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestKVWithoutEvents: under the default kv policy, engines that publish
// no KV events (kvgate-sim --kv-events=false) are routed on what kvgate
// sent them: every turn of a conversation goes to the engine that had the
// previous ones, which reports the prefix cached, and /debug/state shows
// the engine's approximate entries apart from its (empty) precise tiers.
// The engines send no LOAD reports (--load-interval 0): with no timing, a
// simulated engine's report may catch a request between its arrival and
// its instant prefill and say, for up to a report period after the
// request ended, that its whole prompt is queued, which outweighs any
// prefix credit and would send the next turn elsewhere by chance.
func TestKVWithoutEvents(t *testing.T) {
	var addrs []string
	for _, id := range []string{"sim-a", "sim-b"} {
		p := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", id, "--model", model, "--profile", "zero",
			"--load-interval", "0", "--kv-events=false")
		addrs = append(addrs, p.waitLog(t, "serving")["addr"].(string))
	}
	_, base := startKvgate(t, "--engine", strings.Join(addrs, ","))
	waitReady(t, base)
	for conv := range 3 {
		// Long enough that the credit for a guessed prefix (at
		// ApproxBlockCost) outweighs the decode batch the previous turn,
		// released just after its response was sent, may still add.
		system := fmt.Sprintf("Conversation %d. %s", conv, strings.Repeat("You are a meticulous code reviewer. ", 200))
		msgs := []any{map[string]any{"role": "system", "content": system}}
		var engineID string
		for turn := range 5 {
			msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d: review this", turn)})
			resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": model, "messages": msgs, "max_tokens": 8, "ignore_eos": true})
			var out struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
				Usage usage `json:"usage"`
			}
			if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 {
				t.Fatalf("conversation %d turn %d: %d %s", conv, turn, resp.StatusCode, body)
			}
			got := resp.Header.Get("x-kvgate-engine")
			if turn == 0 {
				engineID = got
			} else {
				if got != engineID {
					t.Fatalf("conversation %d turn %d went to %s, the prefix is on %s", conv, turn, got, engineID)
				}
				if out.Usage.Details.Cached < out.Usage.PromptTokens/2 {
					t.Fatalf("conversation %d turn %d: %d of %d prompt tokens cached", conv, turn, out.Usage.Details.Cached, out.Usage.PromptTokens)
				}
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": out.Choices[0].Message.Content})
		}
	}

	r, err := http.Get(adminOf(t, base) + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Index struct {
			Engines []struct {
				Engine       string
				Blocks       []int
				ApproxBlocks int
				Precise      bool
			} `json:"engines"`
		} `json:"index"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	approx := 0
	for _, e := range st.Index.Engines {
		if e.Precise || fmt.Sprint(e.Blocks) != "[0 0 0]" {
			t.Fatalf("%s: precise %v, blocks %v; it sent no events", e.Engine, e.Precise, e.Blocks)
		}
		approx += e.ApproxBlocks
	}
	if approx == 0 {
		t.Fatalf("no approximate entries in /debug/state: %+v", st.Index.Engines)
	}
}
