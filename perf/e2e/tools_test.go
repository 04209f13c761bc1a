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
	if _, err := os.Stat(filepath.Join("sdk", "node_modules", "@anthropic-ai", "sdk")); err != nil {
		t.Fatal("the SDKs are not installed: run npm install --prefix perf/e2e/sdk")
	}
	_, base := startKvgate(t, "--sim-engines", "2", "--sim-profile", "zero", "--api-key", "test-key")
	cmd := exec.Command("node", "tools.mjs")
	cmd.Dir = "sdk"
	cmd.Env = append(os.Environ(), "KVGATE_URL="+base, "KVGATE_KEY=test-key")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("SDK run failed: %v\n%s", err, out)
	}
}
