//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfficialSDKs runs the official OpenAI and Anthropic Node SDKs against
// kvgate, streaming and not, with an API key. .ci/run installs them
// (npm install in perf/e2e/sdk); without node_modules the test fails with
// the command to run.
func TestOfficialSDKs(t *testing.T) {
	if _, err := os.Stat(filepath.Join("sdk", "node_modules", "openai")); err != nil {
		t.Fatal("the SDKs are not installed: run npm install --prefix perf/e2e/sdk")
	}
	_, base := startKvgate(t, "--sim-engines", "2", "--sim-profile", "zero", "--api-key", "test-key")
	cmd := exec.Command("node", "sdk.mjs")
	cmd.Dir = "sdk"
	cmd.Env = append(os.Environ(), "KVGATE_URL="+base, "KVGATE_KEY=test-key")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("SDK run failed: %v\n%s", err, out)
	}
}
