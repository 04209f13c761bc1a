//go:build e2e

package e2e

import "testing"

// TestSDKLogprobs reads logprobs through the official OpenAI Node SDK
// (sdk/logprobs.mjs): chat's logprobs.content, whole and assembled by the
// streaming helper, completions' tokens and top_logprobs, streamed and
// whole, from kvgate-sim's deterministic sampler over the wire protocol's
// sampling section; and the 400s naming top_logprobs, best_of and, for
// Anthropic, logprobs.
func TestSDKLogprobs(t *testing.T) {
	runSDKScript(t, "logprobs.mjs")
}
