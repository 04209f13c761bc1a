package tokenize

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestVisionChatGolden renders the chat templates of Qwen2-VL (and
// Qwen2.5-VL, which ships the same one), Gemma 3 and Llama 4 over
// messages whose content lists hold {"type": "image"} parts, the shape
// the gateway leaves images in, as @huggingface/jinja does
// (testdata/vision_chat_cases.json, goldens by gen/gen_vision.mjs): each
// image part becomes its model's marker (<|vision_start|><|image_pad|>
// <|vision_end|>, <start_of_image>, <|image|>) where the template puts
// it, which the gateway then expands into the processor's placeholder
// tokens. The Qwen renderings are tokenized too: each marker is one
// added token. A case that names a difference (differs) is skipped
// while the rendering shows it: the Jinja engine's, not the images'.
func TestVisionChatGolden(t *testing.T) {
	var file struct {
		Templates map[string]string            `json:"templates"`
		Cases     []map[string]json.RawMessage `json:"cases"`
	}
	var golden []struct {
		Name  string   `json:"name"`
		Text  *string  `json:"text"`
		Error string   `json:"error"`
		IDs   []uint32 `json:"ids"`
	}
	readJSON(t, "testdata/vision_chat_cases.json", &file)
	readJSON(t, "testdata/vision_chat_golden.json", &golden)
	if len(golden) != len(file.Cases) {
		t.Fatalf("%d cases, %d goldens: rerun testdata/gen/gen_vision.mjs", len(file.Cases), len(golden))
	}
	tokenizers := map[string]*Tokenizer{"qwen3": builtin(t)}
	for i, c := range file.Cases {
		want := golden[i]
		t.Run(want.Name, func(t *testing.T) {
			var tmpl, tokName, differs string
			_ = json.Unmarshal(c["template"], &tmpl)
			_ = json.Unmarshal(c["tokenizer"], &tokName)
			_ = json.Unmarshal(c["differs"], &differs)
			for _, k := range []string{"template", "tokenizer", "source", "differs"} {
				delete(c, k)
			}
			ct, err := NewChatTemplate(file.Templates[tmpl], "<bos>", "<eos>")
			if err != nil {
				t.Fatal(err)
			}
			text, err := ct.Render(chatInputOf(t, c))
			if want.Text == nil {
				if err == nil {
					t.Fatalf("rendered %q, want the error %q", text, want.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if text != *want.Text && differs != "" {
				t.Skipf("a known difference: %s", differs)
			}
			if text != *want.Text {
				t.Fatalf("rendering differs\n got %q\nwant %q", text, *want.Text)
			}
			if tokName == "" {
				return
			}
			if ids := tokenizers[tokName].Encode(nil, text, false); !slices.Equal(ids, want.IDs) {
				t.Fatalf("ids differ\n got %v\nwant %v", ids, want.IDs)
			}
		})
	}
}
