//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDKToolUse runs tool use through the official OpenAI and Anthropic
// Node SDKs (sdk/tools.mjs): OpenAI's streaming helper assembling a tool
// call from its deltas and the tool message's answer; Anthropic's loop of
// tool_use, tool_result and answer, streamed and whole, with thinking;
// against kvgate-sim engines that call the tools offered in Qwen's syntax.
func TestSDKToolUse(t *testing.T) {
	runSDKScript(t, "tools.mjs")
}

// runSDKScript runs one of sdk/'s scripts against a kvgate with two
// zero-cost simulated engines and an API key; it must print "ok".
func runSDKScript(t *testing.T, script string) {
	if _, err := os.Stat(filepath.Join("sdk", "node_modules", "@anthropic-ai", "sdk")); err != nil {
		t.Fatal("the SDKs are not installed: run npm install --prefix perf/e2e/sdk")
	}
	_, base := startKvgate(t, "--sim-engines", "2", "--sim-profile", "zero", "--api-key", "test-key")
	cmd := exec.Command("node", script)
	cmd.Dir = "sdk"
	cmd.Env = append(os.Environ(), "KVGATE_URL="+base, "KVGATE_KEY=test-key")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("SDK run failed: %v\n%s", err, out)
	}
}

// TestSDKResponses runs the Responses API through the official OpenAI
// Node SDK (sdk/responses.mjs): responses.create, and responses.stream's
// function call followed by its function_call_output and the answer.
func TestSDKResponses(t *testing.T) {
	runSDKScript(t, "responses.mjs")
}
