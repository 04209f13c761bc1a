//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
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
