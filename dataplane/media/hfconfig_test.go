package media

import (
	"errors"
	"testing"
)

// Configs as the checkpoints ship them (the fields the counts depend on).
func TestProcessorFromConfig(t *testing.T) {
	cases := []struct {
		name, config  string
		proc          string
		width, height int
		tokens        int
	}{
		{"Qwen2-VL-7B-Instruct", `{"min_pixels":3136,"max_pixels":12845056,"patch_size":14,"temporal_patch_size":2,"merge_size":2,` +
			`"image_processor_type":"Qwen2VLImageProcessor","processor_class":"Qwen2VLProcessor"}`, "qwen2-vl", 4000, 3000, 15301},
		{"Qwen2.5-VL-7B-Instruct", `{"min_pixels":3136,"max_pixels":12845056,"patch_size":14,"merge_size":2,` +
			`"image_processor_type":"Qwen2_5_VLImageProcessor","processor_class":"Qwen2_5_VLProcessor"}`, "qwen2.5-vl", 1024, 768, 999},
		{"Qwen3-VL-8B-Instruct", `{"size":{"longest_edge":16777216,"shortest_edge":65536},"patch_size":16,"merge_size":2,` +
			`"image_processor_type":"Qwen2VLImageProcessorFast","processor_class":"Qwen3VLProcessor"}`, "qwen3-vl", 448, 448, 196},
		{"qwen size override", `{"size":{"longest_edge":200000,"shortest_edge":3136},"patch_size":14,"merge_size":2,` +
			`"image_processor_type":"Qwen2VLImageProcessor"}`, "qwen2-vl", 1000, 1000, 225},
		{"gemma-3-4b-it", `{"image_processor_type":"Gemma3ImageProcessor","do_pan_and_scan":null,"size":{"height":896,"width":896}}`,
			"gemma3", 640, 480, 258},
		{"Llama-4-Scout", `{"image_processor_type":"Llama4ImageProcessorFast","max_patches":16,"size":{"height":336,"width":336}}`,
			"llama4", 1000, 1000, 1452},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ProcessorFromConfig([]byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			e, err := p.Expand(c.width, c.height)
			if err != nil || p.Name() != c.proc || e.Tokens() != c.tokens {
				t.Fatalf("%s: %d tokens, %v; want %s, %d", p.Name(), e.Tokens(), err, c.proc, c.tokens)
			}
		})
	}
	for _, bad := range []string{`{"image_processor_type":"CLIPImageProcessor"}`, `{"image_processor_type":"Gemma3ImageProcessor","do_pan_and_scan":true}`,
		`{"image_processor_type":"Llama4ImageProcessor","size":{"height":448,"width":448}}`, `not json`} {
		if _, err := ProcessorFromConfig([]byte(bad)); !errors.Is(err, ErrNoProcessor) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
