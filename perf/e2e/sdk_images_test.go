//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDKImages runs images through the official OpenAI and Anthropic Node
// SDKs (sdk/images.mjs) against kvgate with Qwen2.5-VL's image processor
// before three kvgate-sim engines that take images: chat.completions
// with an image_url data URL and messages with a base64 image block,
// streamed and not, each a three-turn conversation about one image whose
// turns 2 and 3 stay on turn 1's engine with cached tokens past the
// image; undecodable image bytes are each SDK's BadRequestError naming
// the part.
func TestSDKImages(t *testing.T) {
	if _, err := os.Stat(filepath.Join("sdk", "node_modules", "@anthropic-ai", "sdk")); err != nil {
		t.Fatal("the SDKs are not installed: run npm install --prefix perf/e2e/sdk")
	}
	_, base := startKvgate(t, append(visionFlags(t), "--engine", strings.Join(visionEngines(t, 3), ","))...)
	waitEngines(t, admins[base], 3)
	dir := t.TempDir()
	var paths []string
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprintf("image-%d.png", i))
		if err := os.WriteFile(p, grayPNG(t, 640, 480, byte(10+i)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	// Every image is 640x480 (391 placeholders), and every conversation
	// starts with questions[0]: one span for all four.
	through, _ := imageSpan(t, base, grayPNG(t, 640, 480, 10))
	qs, _ := json.Marshal(questions)
	cmd := exec.Command("node", "images.mjs")
	cmd.Dir = "sdk"
	cmd.Env = append(os.Environ(), "KVGATE_URL="+base, "KVGATE_MODEL="+visionModel, "KVGATE_IMAGES="+strings.Join(paths, ","),
		"KVGATE_QUESTIONS="+string(qs), fmt.Sprintf("KVGATE_THROUGH=%d", through))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("SDK run failed: %v", err)
	}
}
