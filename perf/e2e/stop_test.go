//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStopStrings: generation with a fixed seed is repeatable, so a
// substring of the first answer used as a stop string must end the second
// answer just before it, with finish_reason "stop", streamed or not.
func TestStopStrings(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero")
	ask := func(extra map[string]any) (string, string) {
		body := map[string]any{"model": model, "prompt": "tell me a story", "max_tokens": 40, "ignore_eos": true, "seed": 42}
		for k, v := range extra {
			body[k] = v
		}
		r, out := post(t, base+"/v1/completions", body)
		if r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, out)
		}
		if extra["stream"] == true {
			var text, finish string
			for _, ev := range sseEvents(t, out) {
				var c struct {
					Choices []struct {
						Text         string  `json:"text"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if ev == "[DONE]" || json.Unmarshal([]byte(ev), &c) != nil || len(c.Choices) == 0 {
					continue
				}
				text += c.Choices[0].Text
				if c.Choices[0].FinishReason != nil {
					finish = *c.Choices[0].FinishReason
				}
			}
			return text, finish
		}
		var c struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatal(err)
		}
		return c.Choices[0].Text, c.Choices[0].FinishReason
	}
	full, finish := ask(nil)
	if again, _ := ask(nil); again != full || finish != "length" {
		t.Fatalf("a seeded request is not repeatable: %q vs %q (%s)", full, again, finish)
	}
	runes := []rune(full)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	want := full[:strings.Index(full, stop)]
	for _, stream := range []bool{false, true} {
		text, finish := ask(map[string]any{"stop": []string{stop}, "stream": stream})
		if text != want || finish != "stop" {
			t.Fatalf("stream=%v: got %q (%s), want %q before stop %q", stream, text, finish, want, stop)
		}
	}
}
