package loadgen

import (
	"strings"
	"testing"

	"github.com/kvgate/kvgate/perf/workload"
)

// TestAdapterRequests: a request of a LoRA workload names its adapter as
// the model; a base-model request names the model.
func TestAdapterRequests(t *testing.T) {
	for _, api := range []string{"openai-completions", "openai-chat", "anthropic"} {
		o := Options{API: api, Model: "m", Detokenize: func([]uint32) string { return "x" }}
		b, _ := requestBody(o, workload.Request{Prompt: []uint32{1}, Output: 1, LoRA: 3})
		base, _ := requestBody(o, workload.Request{Prompt: []uint32{1}, Output: 1})
		if !strings.Contains(string(b), `"model":"m-lora3"`) || !strings.Contains(string(base), `"model":"m"`) {
			t.Fatalf("%s: adapter body %s, base body %s", api, b, base)
		}
	}
}
