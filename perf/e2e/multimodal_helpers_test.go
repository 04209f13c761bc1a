//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvgate/kvgate/dataplane/tokenize"
)

// visionModelDir writes a model directory kvgate's --model loads as
// visionModel: the builtin Qwen tokenizer (its vocabulary has Qwen-VL's
// vision tokens) with Qwen2-VL's chat template, which Qwen2.5-VL ships
// too (dataplane/tokenize/testdata/vision_chat_cases.json, checked there
// against @huggingface/jinja).
func visionModelDir(t *testing.T) string {
	t.Helper()
	var cases struct {
		Templates map[string]string `json:"templates"`
	}
	b, err := os.ReadFile("../../dataplane/tokenize/testdata/vision_chat_cases.json")
	if err == nil {
		err = json.Unmarshal(b, &cases)
	}
	if err != nil || cases.Templates["qwen2-vl"] == "" {
		t.Fatalf("the Qwen2-VL chat template: %v", err)
	}
	tokJSON, cfgJSON, err := tokenize.BuiltinFiles()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": cfgJSON,
		tokenize.ChatTemplateFile: []byte(cases.Templates["qwen2-vl"])} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// visionFlags are kvgate's flags for serving visionModel: its model
// directory (visionModelDir) and Qwen2.5-VL's image processor.
func visionFlags(t *testing.T) []string {
	t.Helper()
	return []string{"--model", visionModel + "=" + visionModelDir(t), "--media-processor", visionModel + "=qwen2.5-vl"}
}

// visionEngines starts n zero-cost kvgate-sim engines of visionModel that
// take images, mm-0 to mm-(n-1), and returns their addresses.
func visionEngines(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for i := range n {
		addrs = append(addrs, startVisionSim(t, fmt.Sprintf("mm-%d", i)))
	}
	return addrs
}

// startVisionSim starts one zero-cost kvgate-sim engine of visionModel
// named id, with extra flags, and returns its address.
func startVisionSim(t *testing.T, id string, extra ...string) string {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--model", visionModel, "--profile", "zero", "--id", id}, extra...)
	return start(t, "kvgate-sim", args...).waitLog(t, "serving")["addr"].(string)
}

// grayPNG is a w x h grey PNG whose pixels depend on seed: images of one
// size (one placeholder count) with different content ids.
func grayPNG(t *testing.T, w, h int, seed byte) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i)*7 + seed
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
