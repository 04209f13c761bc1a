package media

import (
	"fmt"
	"math"
)

// Qwen-VL's dynamic resolution, as transformers' Qwen2VLImageProcessor
// computes it (src/transformers/models/qwen2_vl/image_processing_qwen2_vl.py,
// smart_resize, commit cb0fc56f3caccab77d00d44051a67d4b0980cbd2): the
// image is resized to sides that are multiples of factor = patch_size x
// merge_size, each side rounded to the nearest multiple (Python's round:
// half to even), then scaled down (floor) to at most max_pixels or up
// (ceil) to at least min_pixels keeping the aspect ratio; sides under
// factor, or an aspect ratio over 200, are refused. The image is
// (h/patch) x (w/patch) patches, one temporal patch, and every merge x
// merge patches become one token: h*w / (patch*merge)^2 tokens
// <|image_pad|>, which replace the one the chat template writes between
// <|vision_start|> and <|vision_end|> (processing_qwen2_vl.py: grid_thw
// .prod() // merge_size**2).
//
// Qwen2.5-VL changes nothing of this (image_processing_qwen2_5_vl.py,
// commit e693210a7ce84acee8049d096798d7614599f2a3: the same smart_resize,
// patch 14, merge 2, min_pixels 56*56, max_pixels 28*28*1280). Qwen3-VL
// has no image processor of its own: its checkpoints configure
// Qwen2VLImageProcessorFast with patch_size 16 (factor 32) and size
// shortest_edge 65536, longest_edge 16777216 (processing_qwen3_vl.py,
// commit 0117d5f78564b4f03ed18e4dcffa7a8d2a45f831, counts tokens the
// same way). Checkpoints may set other min/max pixels in their
// preprocessor_config.json (Qwen2/2.5-VL instruct checkpoints ship
// max_pixels 12845056): give them as processor options.
type qwenSpec struct {
	patch, merge         int
	minPixels, maxPixels int
}

var (
	qwen2VL = qwenSpec{patch: 14, merge: 2, minPixels: 56 * 56, maxPixels: 28 * 28 * 1280}
	qwen3VL = qwenSpec{patch: 16, merge: 2, minPixels: 65536, maxPixels: 16777216}
)

type qwen struct {
	name string
	spec qwenSpec
}

func newQwen(name string, s qwenSpec, o ProcessorOptions) (Processor, error) {
	if o.MaxTiles != 0 {
		return nil, fmt.Errorf("%w: %s has no tiles (max-tiles is Llama 4's)", ErrNoProcessor, name)
	}
	if o.MinPixels > 0 {
		s.minPixels = o.MinPixels
	}
	if o.MaxPixels > 0 {
		s.maxPixels = o.MaxPixels
	}
	if s.minPixels > s.maxPixels {
		return nil, fmt.Errorf("%w: %s min-pixels %d over max-pixels %d", ErrNoProcessor, name, s.minPixels, s.maxPixels)
	}
	return qwen{name: name, spec: s}, nil
}

func (q qwen) Name() string   { return q.name }
func (q qwen) Marker() string { return "<|image_pad|>" }

func (q qwen) Expand(width, height int) (Expansion, error) {
	h, w, err := q.spec.smartResize(height, width)
	if err != nil {
		return Expansion{}, err
	}
	n := (h / q.spec.patch) * (w / q.spec.patch) / (q.spec.merge * q.spec.merge)
	return Expansion{Runs: []Run{{Token: "<|image_pad|>", Count: n}}, Features: n}, nil
}

// smartResize is smart_resize of the file cited above, in the same
// float64 arithmetic Python does.
func (s qwenSpec) smartResize(height, width int) (int, int, error) {
	factor := s.patch * s.merge
	if height < factor || width < factor {
		return 0, 0, fmt.Errorf("%w: %dx%d has a side under %d pixels", ErrImageSize, width, height, factor)
	}
	if float64(max(height, width))/float64(min(height, width)) > 200 {
		return 0, 0, fmt.Errorf("%w: %dx%d has an aspect ratio over 200", ErrImageSize, width, height)
	}
	f := float64(factor)
	hBar := int(math.RoundToEven(float64(height)/f)) * factor
	wBar := int(math.RoundToEven(float64(width)/f)) * factor
	switch {
	case hBar*wBar > s.maxPixels:
		beta := math.Sqrt(float64(height*width) / float64(s.maxPixels))
		hBar = int(math.Floor(float64(height)/beta/f)) * factor
		wBar = int(math.Floor(float64(width)/beta/f)) * factor
	case hBar*wBar < s.minPixels:
		beta := math.Sqrt(float64(s.minPixels) / float64(height*width))
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	if hBar == 0 || wBar == 0 {
		return 0, 0, fmt.Errorf("%w: %dx%d resizes to nothing under max-pixels %d", ErrImageSize, width, height, s.maxPixels)
	}
	return hBar, wBar, nil
}
