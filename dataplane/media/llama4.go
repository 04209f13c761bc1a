package media

import "fmt"

// llama4 is Llama 4's tiling, as transformers computes it
// (src/transformers/models/llama4/image_processing_llama4_fast.py, commit
// e1b551679e267be053b45581cbabd028a14defd2: find_supported_resolutions
// and get_best_fit; processing_llama4.py, commit
// f5d3f1e134fe49e8dd4009846e54c1ccfe747328: _prompt_split_image).
//
// The canvases are every rows x cols grid of 336-pixel tiles with at most
// max_patches (16) tiles. Each canvas scales the image by min(canvas_h/h,
// canvas_w/w) (float32, as torch divides integer tensors); the smallest
// scale >= 1 is chosen if any, else the largest under 1, and among the
// canvases with that scale the smallest area. Each tile is (336/14)^2
// patches, pixel-shuffled by 1/0.5^2 = 4: 144 <|patch|> tokens. With more
// than one tile the image's tokens are, row by row, each tile's patches
// with <|tile_x_separator|> between tiles and <|tile_y_separator|> after
// the row, then the global tile (the whole image at 336x336); with one
// tile only the global tile:
//
//	<|image_start|> [tiles] <|image|> 144 x <|patch|> <|image_end|>
//
// replacing the <|image|> the chat template writes: 3 + 144 tokens, plus
// 145 per tile when there are several.
type llama4 struct{ maxTiles int }

const (
	llama4Tile           = 336
	llama4PatchesPerTile = (llama4Tile / 14) * (llama4Tile / 14) / 4
	llama4MaxTiles       = 16
)

func newLlama4(o ProcessorOptions) (Processor, error) {
	if o.MinPixels != 0 || o.MaxPixels != 0 {
		return nil, fmt.Errorf("%w: llama4 tiles images; min-pixels and max-pixels are Qwen-VL's", ErrNoProcessor)
	}
	p := llama4{maxTiles: llama4MaxTiles}
	if o.MaxTiles > 0 {
		p.maxTiles = o.MaxTiles
	}
	return p, nil
}

func (llama4) Name() string   { return "llama4" }
func (llama4) Marker() string { return "<|image|>" }

func (p llama4) Expand(width, height int) (Expansion, error) {
	if width <= 0 || height <= 0 {
		return Expansion{}, fmt.Errorf("%w: %dx%d", ErrImageSize, width, height)
	}
	rows, cols := p.bestFit(height, width)
	var runs []Run
	runs = append(runs, Run{Token: "<|image_start|>", Count: 1})
	if rows*cols > 1 {
		for range rows {
			for x := range cols {
				runs = append(runs, Run{Token: "<|patch|>", Count: llama4PatchesPerTile})
				if x < cols-1 {
					runs = append(runs, Run{Token: "<|tile_x_separator|>", Count: 1})
				}
			}
			runs = append(runs, Run{Token: "<|tile_y_separator|>", Count: 1})
		}
	}
	runs = append(runs, Run{Token: "<|image|>", Count: 1}, Run{Token: "<|patch|>", Count: llama4PatchesPerTile},
		Run{Token: "<|image_end|>", Count: 1})
	features := llama4PatchesPerTile
	if rows*cols > 1 {
		features += rows * cols * llama4PatchesPerTile
	}
	return Expansion{Runs: runs, Features: features}, nil
}

// bestFit is get_best_fit over find_supported_resolutions' canvases: the
// grid (rows, cols) the image is tiled into.
func (p llama4) bestFit(height, width int) (rows, cols int) {
	type canvas struct {
		rows, cols int
		scale      float32
	}
	var all []canvas
	for n := p.maxTiles; n >= 1; n-- {
		for r := 1; r <= n; r++ {
			if n%r == 0 {
				c := n / r
				sh := float32(r*llama4Tile) / float32(height)
				sw := float32(c*llama4Tile) / float32(width)
				all = append(all, canvas{rows: r, cols: c, scale: min(sh, sw)})
			}
		}
	}
	var chosen float32 = -1
	for _, c := range all { // the smallest upscale
		if c.scale >= 1 && (chosen < 0 || c.scale < chosen) {
			chosen = c.scale
		}
	}
	if chosen < 0 {
		for _, c := range all { // else the least downscale
			if c.scale > chosen {
				chosen = c.scale
			}
		}
	}
	best := canvas{}
	for _, c := range all {
		if c.scale == chosen && (best.rows == 0 || c.rows*c.cols < best.rows*best.cols) {
			best = c
		}
	}
	return best.rows, best.cols
}
