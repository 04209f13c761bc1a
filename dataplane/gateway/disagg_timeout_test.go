package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// notDecodeHandoff is what is wrong with g as a decode engine's GENERATE:
// it must be a decode-side hand-off from prefill-0.
func notDecodeHandoff(g *wire.Generate) string {
	if g.Flags&wire.GenHandoff == 0 || g.Handoff.Side != wire.HandoffDecode || len(g.KVTransfer) == 0 || string(g.Handoff.Peer) != "prefill-0" {
		return "not a decode-side hand-off from prefill-0"
	}
	return ""
}

// TestSplitTransferTimeout: a transfer that never lands (the decode
// engine takes the hand-off and never answers) ends the client's stream,
// after the first token from the prefill engine, with a well-formed
// in-stream error in the API's own format, OpenAI and Anthropic alike;
// it is counted as a timeout, the decode side is cancelled and both
// reservations are released. The decode engine never answering, the
// transfer timeout fires whatever its length: nothing here races a clock.
func TestSplitTransferTimeout(t *testing.T) {
	dec, addr := startSilentEngine(t, "decode-0", wire.FeatureSnapshot|wire.RoleDecode.Features(), notDecodeHandoff) // a decode engine whose KV transfer never lands
	f := startSplitFleetWith(t, splitOpts{decodeAddr: addr, gateway: func(g *Gateway) { g.TransferTimeout = 200 * time.Millisecond }})
	for i, tc := range []struct {
		name, path, body string
		errorEvent       func(t *testing.T, out string) map[string]any
	}{
		{"openai", "/v1/completions", `{"model":"` + model + `","prompt":"` + longPrompt(5) + `","max_tokens":20,"stream":true}`, openAIErrorEvent},
		{"anthropic", "/v1/messages", `{"model":"` + model + `","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"` +
			longPrompt(6) + `"}]}`, anthropicErrorEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := post(t, f.base+tc.path, "", tc.body)
			if resp.StatusCode != 200 || resp.Header.Get(prefillEngineHeader) != "prefill-0" || resp.Header.Get("x-kvgate-engine") != "decode-0" {
				t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, out)
			}
			e := tc.errorEvent(t, out)
			if msg, _ := e["message"].(string); !strings.Contains(msg, "KV transfer from prefill-0 to decode-0 did not complete in time") {
				t.Fatalf("error %v in: %s", e, out)
			}
			f.idle(t)
			waitFor(t, func() bool { g, c, _ := dec.counts(); return g == i+1 && c == i+1 })
			f.counts(t, float64(i+1), 0, 0, 0, float64(i+1), 0)
		})
	}
	if _, _, reason := dec.counts(); reason != "" {
		t.Fatal(reason)
	}
}

// openAIErrorEvent returns the error of an OpenAI stream that sent at
// least one token first, and ends in one data: {"error":{...}} event and
// data: [DONE] (as vLLM's own stream ends on an error).
func openAIErrorEvent(t *testing.T, out string) map[string]any {
	t.Helper()
	evs := sseData(t, out)
	if len(evs) < 2 || evs[0]["choices"] == nil {
		t.Fatalf("no token before the error: %s", out)
	}
	e, ok := evs[len(evs)-1]["error"].(map[string]any)
	if !ok || e["type"] == nil || !strings.HasSuffix(out, "}\n\ndata: [DONE]\n\n") || strings.Count(out, `"error"`) != 1 {
		t.Fatalf("the stream does not end in one error event and [DONE]: %q", out)
	}
	return e
}

// anthropicErrorEvent returns the error of an Anthropic stream that sent
// a text delta first, and ends in one event: error with a
// {"type":"error","error":{...}} body.
func anthropicErrorEvent(t *testing.T, out string) map[string]any {
	t.Helper()
	if !strings.Contains(out, "event: content_block_delta\n") {
		t.Fatalf("no token before the error: %s", out)
	}
	i := strings.LastIndex(out, "event: error\n")
	if i < 0 || strings.Count(out, "event: error\n") != 1 || strings.Contains(out[i:], "event: message_stop") {
		t.Fatalf("the stream does not end in one error event: %s", out)
	}
	evs := sseData(t, out[i:])
	if len(evs) != 1 || evs[0]["type"] != "error" {
		t.Fatalf("error event: %s", out[i:])
	}
	e, ok := evs[0]["error"].(map[string]any)
	if !ok || e["type"] == nil {
		t.Fatalf("error event: %s", out[i:])
	}
	return e
}
