package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// completionText is a completion's text and completion tokens (streamed:
// the deltas joined, usage from the usage chunk).
func completionText(t *testing.T, base string, stream bool, maxTokens int, stop string) (string, int) {
	t.Helper()
	stops := "[]"
	if stop != "" {
		b, _ := json.Marshal([]string{stop})
		stops = string(b)
	}
	_, out := post(t, base+"/v1/completions", "", fmt.Sprintf(`{"model":%q,"prompt":"Tell me a story","max_tokens":%d,"seed":7,`+
		`"ignore_eos":true,"stop":%s,"stream":%v,"stream_options":{"include_usage":%v}}`, model, maxTokens, stops, stream, stream))
	type body struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage *struct {
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	var text strings.Builder
	completion := -1
	bodies := []string{out}
	if stream {
		bodies = nil
		for _, line := range strings.Split(out, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				bodies = append(bodies, d)
			}
		}
	}
	for _, b := range bodies {
		var v body
		decodeJSON(t, b, &v)
		for _, c := range v.Choices {
			text.WriteString(c.Text)
		}
		if v.Usage != nil {
			completion = v.Usage.Completion
		}
	}
	return text.String(), completion
}

// TestStopStringsAcrossBatches: the zero-cost engines send a request's
// tokens in a few large frames (wire.FeatureTokenBatch), yet a stop string
// ends the output at the token that completed it, wherever it falls in a
// frame: the text is what comes before the stop string and usage counts
// the tokens up to that one, found here from the same seeded output cut
// at each length.
func TestStopStringsAcrossBatches(t *testing.T) {
	base := startGatewayWith(t, gwOptions{}).base
	const n = 24
	prefixes := make([]string, n+1) // prefixes[k]: the text of the first k tokens
	for k := 1; k <= n; k++ {
		prefixes[k], _ = completionText(t, base, false, k, "")
	}
	full := prefixes[n]
	checked := 0
	for p := 0; p+2 <= len(full); p++ {
		stop := full[p : p+2]
		if strings.Index(full, stop) != p || !strings.HasPrefix(full[p:], stop) || strings.ContainsRune(stop, '\uFFFD') {
			continue // not its first occurrence, or split text
		}
		want := 0
		for k := 1; k <= n && want == 0; k++ {
			if strings.Contains(prefixes[k], stop) {
				want = k
			}
		}
		for _, stream := range []bool{false, true} {
			text, used := completionText(t, base, stream, n, stop)
			if text != full[:p] || used != want {
				t.Fatalf("stop %q (at byte %d), stream %v: text %q, %d tokens; want %q, %d", stop, p, stream, text, used, full[:p], want)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d stop strings checked in %q", checked, full)
	}
}
