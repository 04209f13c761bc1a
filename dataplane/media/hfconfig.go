package media

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ProcessorFromConfig builds the processor a checkpoint's
// preprocessor_config.json describes, as transformers' AutoImageProcessor
// would pick it: image_processor_type names the family, and the fields
// the token count depends on are taken from the file (Qwen-VL's
// patch_size, merge_size and min/max pixels, given as min_pixels and
// max_pixels or as size.shortest_edge and size.longest_edge; Llama 4's
// max_patches and tile size). A processor kvgate does not know, or an
// option it cannot honour (Gemma 3's pan-and-scan, a Llama 4 tile other
// than 336), is refused by name.
func ProcessorFromConfig(raw []byte) (Processor, error) {
	var c struct {
		Type      string `json:"image_processor_type"`
		Class     string `json:"processor_class"`
		Patch     int    `json:"patch_size"`
		Merge     int    `json:"merge_size"`
		MinPixels int    `json:"min_pixels"`
		MaxPixels int    `json:"max_pixels"`
		Size      struct {
			ShortestEdge int `json:"shortest_edge"`
			LongestEdge  int `json:"longest_edge"`
			Height       int `json:"height"`
			Width        int `json:"width"`
		} `json:"size"`
		MaxPatches int   `json:"max_patches"`
		PanScan    *bool `json:"do_pan_and_scan"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: preprocessor_config.json: %v", ErrNoProcessor, err)
	}
	kind := strings.TrimSuffix(c.Type, "Fast")
	switch kind {
	case "Qwen2VLImageProcessor", "Qwen2_5_VLImageProcessor":
		s := qwen2VL
		name := "qwen2-vl"
		if strings.HasPrefix(c.Class, "Qwen2_5_VL") || kind == "Qwen2_5_VLImageProcessor" {
			name = "qwen2.5-vl"
		}
		if c.Patch == 16 || strings.HasPrefix(c.Class, "Qwen3VL") {
			s, name = qwen3VL, "qwen3-vl"
		}
		if c.Patch > 0 {
			s.patch = c.Patch
		}
		if c.Merge > 0 {
			s.merge = c.Merge
		}
		o := ProcessorOptions{MinPixels: c.MinPixels, MaxPixels: c.MaxPixels}
		if c.Size.ShortestEdge > 0 && c.Size.LongestEdge > 0 { // size wins, as in transformers' Qwen2VLImageProcessor
			o.MinPixels, o.MaxPixels = c.Size.ShortestEdge, c.Size.LongestEdge
		}
		return newQwen(name, s, o)
	case "Gemma3ImageProcessor":
		if c.PanScan != nil && *c.PanScan {
			return nil, fmt.Errorf("%w: gemma3 with do_pan_and_scan (crops add a variable number of images)", ErrNoProcessor)
		}
		return gemma3{}, nil
	case "Llama4ImageProcessor":
		if (c.Size.Height != 0 && c.Size.Height != llama4Tile) || (c.Size.Width != 0 && c.Size.Width != llama4Tile) {
			return nil, fmt.Errorf("%w: llama4 with %dx%d tiles (kvgate knows 336)", ErrNoProcessor, c.Size.Width, c.Size.Height)
		}
		return newLlama4(ProcessorOptions{MaxTiles: c.MaxPatches})
	}
	return nil, fmt.Errorf("%w: image processor %q (known: Qwen2VLImageProcessor, Qwen2_5_VLImageProcessor, Gemma3ImageProcessor, Llama4ImageProcessor)",
		ErrNoProcessor, c.Type)
}
