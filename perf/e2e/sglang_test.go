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
	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// Sizes of the fake SGLang: 16-token pages (--page-size, the bridge's
// --block-size), a pool of 48 pages.
const (
	sglPage  = 16
	sglPages = 48
)

// TestBridgeToFakeSGLang: kvgate -> kvgate-bridge --engine-kind sglang -> a
// fake SGLang (vllmtest.SGLang: native /generate, /get_server_info, its
// scheduler metrics, per-page KV events with signed int64 hashes) as real
// processes but the fake. Completions, streamed and not, are answered
// with the tokens the engine generated for the prompt ids kvgate sent, as
// text and as usage; kvgate's index holds the engine's pages hash for
// hash after warm-up, after evictions, and after the engine and its
// publisher restart on the same ports mid-run (sequence from 0, empty
// cache); LOAD carries the engine's queue and its pool in pages.
func TestBridgeToFakeSGLang(t *testing.T) {
	f, err := vllmtest.Start(model, sglPage, sglPages, vllmtest.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	br := start(t, "kvgate-bridge", "--engine-kind", "sglang", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--engine-url", f.URL, "--kv-events", f.EventsURL, "--replay", f.ReplayURL, "--model", model,
		"--block-size", fmt.Sprint(sglPage), "--id", "sglang-0", "--metrics-interval", "100ms")
	if checked := br.waitLog(t, "SGLang server checked"); checked["page_size"] != float64(sglPage) {
		t.Fatalf("checked %v", checked)
	}
	line := br.waitLog(t, "bridge serving")
	addr, bridgeAdmin := line["addr"].(string), "http://"+line["admin"].(string)
	_, base := startKvgate(t, "--engine", addr)
	waitReady(t, base)
	admin := adminOf(t, base)
	tok, _, err := tokenize.Open("")
	if err != nil {
		t.Fatal(err)
	}

	n := 0
	text := func() string {
		n++
		return fmt.Sprintf("Conversation %d. %s", n, strings.Repeat("SGLang serves pages of a radix tree to the bridge. ", 10))
	}
	first := text()
	sglangAnswers(t, base, f, tok, first)

	// The engine's pages reach the index (PUB drops what precedes the
	// subscription: nudge with new prompts until a page arrived).
	checkFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if indexSets(t, admin)[addr].Blocks[0] > 0 {
			return nil
		}
		complete(t, base, text(), 1)
		return fmt.Errorf("no KV event reached kvgate's index")
	})
	nudge := func() { complete(t, base, text(), 1) }
	waitSet(t, admin, addr, f, nil, nudge)

	// Past the pool: the radix cache evicts, page by page.
	for range 8 {
		complete(t, base, text(), 1)
	}
	if f.Blocks() != sglPages {
		t.Fatalf("the fake holds %d pages, want a full pool of %d", f.Blocks(), sglPages)
	}
	waitSet(t, admin, addr, f, nil, nil)
	for _, reason := range []string{"unknown_block", "unknown_parent", "undecodable_event", "cache_salt"} {
		waitMetric(t, bridgeAdmin, fmt.Sprintf("kvgate_bridge_blocks_skipped_total{reason=%q} ", reason), " 0")
	}

	// LOAD: the queue the engine's metrics state, its pool in pages.
	f.SetQueued(3)
	checkFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		l := reportedLoad(t, admin, "sglang-0")
		if l == nil || l.Waiting != 3 || len(l.Tiers) != 1 || l.Tiers[0].Total != sglPages || l.Tiers[0].Used == 0 {
			return fmt.Errorf("kvgate's last LOAD of sglang-0: %+v", l)
		}
		return nil
	})

	// The engine restarts on the same ports: the bridge sees its
	// publisher's sequence start again and kvgate's index holds the new
	// engine's pages only, with requests answered all along.
	f.Close()
	ev, rp, hp := f.Addrs()
	if f, err = vllmtest.Start(model, sglPage, sglPages, vllmtest.SGLang, vllmtest.WithAddrs(ev, rp, hp)); err != nil {
		t.Fatal(err)
	}
	// The first prompt again: the new engine computes it afresh, and the
	// index, equal to the new engine's pages, has forgotten the old one's.
	sglangAnswers(t, base, f, tok, first)
	waitSet(t, admin, addr, f, nil, nudge)
	waitMetric(t, bridgeAdmin, "kvgate_bridge_publisher_restarts_total ", " 1")
	for range 8 {
		complete(t, base, text(), 1)
	}
	waitSet(t, admin, addr, f, nil, nil)
}

// sglangAnswers sends prompt through kvgate twice, streamed and not, and
// checks each answer against what the fake SGLang generated for the ids
// it got: the text kvgate's tokenizer makes of them, their count, the
// prompt's; and that the bridge asked SGLang's native /generate.
func sglangAnswers(t *testing.T, base string, f *vllmtest.Fake, tok *tokenize.Tokenizer, prompt string) {
	t.Helper()
	const maxTokens = 5
	before := len(f.Requests())
	resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens, "stream": true})
	events := sseEvents(t, body)
	if resp.StatusCode != http.StatusOK || len(events) < 2 || events[len(events)-1] != "[DONE]" || resp.Header.Get("x-kvgate-engine") != "sglang-0" {
		t.Fatalf("streamed completion: %d %q", resp.StatusCode, body)
	}
	var streamed strings.Builder
	for _, e := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		for _, ch := range c.Choices {
			streamed.WriteString(ch.Text)
		}
	}
	resp, body = post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens})
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			usage
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
		t.Fatalf("completion: %d %v %s", resp.StatusCode, err, body)
	}
	reqs := f.Requests()[before:]
	if len(reqs) != 2 {
		t.Fatalf("the engine got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		sp, _ := r.Body["sampling_params"].(map[string]any)
		if r.Body["stream"] != true || r.Body["input_ids"] == nil || r.Body["prompt"] != nil || sp["max_new_tokens"] != float64(maxTokens) {
			t.Fatalf("the engine got %v", r.Body)
		}
	}
	want := tok.DecodeString(vllmtest.Generated(reqs[0].Prompt, maxTokens), true)
	if streamed.String() != want || out.Choices[0].Text != want {
		t.Fatalf("answered %q streamed and %q not, want %q", streamed.String(), out.Choices[0].Text, want)
	}
	if u := out.Usage; u.PromptTokens != len(reqs[1].Prompt) || u.CompletionTokens != maxTokens || u.Details.Cached != len(reqs[1].Prompt)/sglPage*sglPage {
		t.Fatalf("usage %+v for a prompt of %d tokens served again", u, len(reqs[1].Prompt))
	}
}

// reportedLoad is engine id's last LOAD report as kvgate's /debug/state
// shows it, nil before one.
func reportedLoad(t *testing.T, admin, id string) *struct {
	Running, Waiting uint32
	Tiers            []struct{ Used, Total uint64 }
} {
	t.Helper()
	r, err := http.Get(admin + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st struct {
		Engines []struct {
			ID           string `json:"id"`
			ReportedLoad *struct {
				Running, Waiting uint32
				Tiers            []struct{ Used, Total uint64 }
			} `json:"reported_load"`
		} `json:"engines"`
	}
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, e := range st.Engines {
		if e.ID == id {
			return e.ReportedLoad
		}
	}
	return nil
}
