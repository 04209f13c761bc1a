package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// n > 1 fans out: n choices indexed 0..n-1, each generated on its own
// (seed plus its index: distinct texts), usage the prompt once and the
// completions summed; streamed, each chunk names its choice and one usage
// chunk and [DONE] end the stream.
func TestChoicesFanOut(t *testing.T) {
	tg := startGatewayWith(t, gwOptions{})
	base := tg.base
	var whole struct {
		Choices []struct {
			Index        int    `json:"index"`
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content string `json:"content"`
			} `json:"message"`
			Logprobs struct {
				Content []any `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	resp, b := post(t, base+"/v1/chat/completions", "",
		`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"n":3,"max_tokens":4,"seed":9,"logprobs":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal([]byte(b), &whole); err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	for i, c := range whole.Choices {
		if c.Index != i || c.FinishReason != "length" || len(c.Logprobs.Content) != 4 {
			t.Fatalf("choice %d: %+v", i, c)
		}
		texts[c.Message.Content] = true
	}
	if len(whole.Choices) != 3 || len(texts) != 3 || whole.Usage.Completion != 12 || whole.Usage.Prompt == 0 {
		t.Fatalf("choices %d (%d distinct), usage %+v: %s", len(whole.Choices), len(texts), whole.Usage, b)
	}

	resp, b = post(t, base+"/v1/completions", "",
		`{"model":"`+model+`","prompt":"Say","n":2,"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	finished := map[float64]bool{}
	var usage map[string]any
	events := strings.Split(strings.TrimSpace(b), "\n\n")
	if events[len(events)-1] != "data: [DONE]" || strings.Count(b, "[DONE]") != 1 {
		t.Fatalf("stream end: %s", b)
	}
	for _, ev := range events[:len(events)-1] {
		var c map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c); err != nil {
			t.Fatalf("%q: %v", ev, err)
		}
		if u, ok := c["usage"].(map[string]any); ok {
			if usage != nil {
				t.Fatalf("two usage chunks: %s", b)
			}
			usage = u
			continue
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		if ch["finish_reason"] != nil {
			finished[ch["index"].(float64)] = true
		}
	}
	if !finished[0] || !finished[1] || len(finished) != 2 || usage == nil || usage["completion_tokens"] != 6.0 {
		t.Fatalf("finished %v usage %v: %s", finished, usage, b)
	}
	waitInflightZero(t, tg.srv)
}
