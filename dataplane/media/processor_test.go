package media

import (
	"errors"
	"testing"
)

// The expected counts are worked by hand from the processors' formulas
// (qwen.go, gemma.go, llama4.go cite the files), not taken from this code.
func TestPlaceholderCounts(t *testing.T) {
	cases := []struct {
		proc          string
		opts          ProcessorOptions
		width, height int
		tokens        int
		why           string
	}{
		// Qwen2-VL: factor 28, min 3136, max 1003520; tokens = h*w/28^2.
		{"qwen2-vl", ProcessorOptions{}, 448, 448, 256, "448/28=16 -> 448x448, 16*16=256"},
		{"qwen2-vl", ProcessorOptions{}, 1024, 768, 999, "h 768/28=27.43->27: 756; w 1024/28=36.57->37: 1036; 27*37=999"},
		{"qwen2-vl", ProcessorOptions{}, 56, 56, 4, "2x2, exactly min_pixels"},
		{"qwen2-vl", ProcessorOptions{}, 28, 28, 4, "784 < 3136: beta=2, ceil(28*2/28)=2 -> 56x56"},
		{"qwen2-vl", ProcessorOptions{}, 70, 70, 4, "70/28=2.5 rounds half to even: 2 -> 56x56 (half up would be 84x84, 9)"},
		{"qwen2-vl", ProcessorOptions{}, 98, 98, 16, "98/28=3.5 rounds to even 4 -> 112x112 = 12544, 4*4=16"},
		{"qwen2-vl", ProcessorOptions{}, 4000, 3000, 1230,
			"2996x4004 > max: beta=sqrt(12e6/1003520)=3.4580; floor(3000/3.458/28)=30, floor(4000/3.458/28)=41; 30*41=1230"},
		{"qwen2.5-vl", ProcessorOptions{}, 1024, 768, 999, "same processor as Qwen2-VL"},
		{"qwen2.5-vl", ProcessorOptions{MaxPixels: 12845056}, 4000, 3000, 15301,
			"checkpoint max 12845056: 2996x4004=11995984 fits; 107*143=15301"},
		{"qwen2-vl", ProcessorOptions{MaxPixels: 200000}, 1000, 1000, 225,
			"1008^2 > 200000: beta=sqrt(5)=2.2361; floor(1000/2.2361/28)=floor(15.97)=15 -> 420x420, 15*15=225"},
		// Qwen3-VL: patch 16, factor 32, min 65536, max 16777216; tokens = h*w/32^2.
		{"qwen3-vl", ProcessorOptions{}, 448, 448, 196, "448/32=14 -> 14*14=196"},
		{"qwen3-vl", ProcessorOptions{}, 200, 100, 72,
			"96x192 < 65536: beta=sqrt(65536/20000)=1.8102; ceil(100*1.8102/32)=6, ceil(200*1.8102/32)=12; 6*12=72"},
		{"qwen3-vl", ProcessorOptions{}, 1920, 1080, 2040, "1080/32=33.75->34, 1920/32=60; 34*60=2040"},
		// Gemma 3: fixed 256 soft tokens plus <start_of_image>, <end_of_image>.
		{"gemma3", ProcessorOptions{}, 17, 4000, 258, "256 + boi + eoi, any size"},
		{"gemma3", ProcessorOptions{}, 896, 896, 258, "256 + boi + eoi"},
		// Llama 4: 336 tiles, at most 16, 144 patches a tile; 147 + 145 a tile when over one.
		{"llama4", ProcessorOptions{}, 336, 336, 147, "scale 1 on 1x1 (smallest area): one tile, global only"},
		{"llama4", ProcessorOptions{}, 100, 100, 147, "every canvas upscales; smallest scale 3.36 on 1x1"},
		{"llama4", ProcessorOptions{}, 672, 336, 437, "scale min(rows, cols/2)=1 first on 1x2: 147+2*145"},
		{"llama4", ProcessorOptions{}, 1000, 1000, 1452, "min(r,c)*0.336 >= 1 needs 3: 3x3 smallest: 147+9*145"},
		{"llama4", ProcessorOptions{}, 5000, 1000, 2467,
			"no upscale fits 16 tiles; best downscale min(2*0.336, 8*0.0672)=0.5376 on 2x8: 147+16*145"},
		{"llama4", ProcessorOptions{MaxTiles: 4}, 1000, 1000, 727, "max 4 tiles: best downscale 0.672 on 2x2: 147+4*145"},
	}
	for _, c := range cases {
		t.Run(c.proc+"/"+c.why, func(t *testing.T) {
			p, err := NewProcessor(c.proc, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			e, err := p.Expand(c.width, c.height)
			if err != nil {
				t.Fatal(err)
			}
			if e.Tokens() != c.tokens {
				t.Fatalf("%s %dx%d: %d tokens, want %d (%s)", c.proc, c.width, c.height, e.Tokens(), c.tokens, c.why)
			}
			if e.Features <= 0 || e.Features > e.Tokens() {
				t.Fatalf("features %d of %d tokens", e.Features, e.Tokens())
			}
		})
	}
}

func TestLlama4Layout(t *testing.T) {
	p, _ := NewProcessor("llama4", ProcessorOptions{})
	e, _ := p.Expand(672, 336) // 1 row, 2 tiles
	var got []string
	for _, r := range e.Runs {
		got = append(got, r.Token)
	}
	want := []string{"<|image_start|>", "<|patch|>", "<|tile_x_separator|>", "<|patch|>", "<|tile_y_separator|>",
		"<|image|>", "<|patch|>", "<|image_end|>"}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("runs %v, want %v", got, want)
		}
	}
	if e.Features != 3*144 {
		t.Fatalf("features %d, want 432", e.Features)
	}
}

func TestProcessorRefuses(t *testing.T) {
	if _, err := NewProcessor("llava-1.5", ProcessorOptions{}); !errors.Is(err, ErrNoProcessor) {
		t.Errorf("unknown model: %v", err)
	}
	for name, o := range map[string]ProcessorOptions{"gemma3": {MaxPixels: 10}, "llama4": {MinPixels: 10},
		"qwen2-vl": {MaxTiles: 4}, "qwen3-vl": {MinPixels: 100, MaxPixels: 10}} {
		if _, err := NewProcessor(name, o); !errors.Is(err, ErrNoProcessor) {
			t.Errorf("%s with %+v: %v", name, o, err)
		}
	}
	q, _ := NewProcessor("qwen2-vl", ProcessorOptions{})
	for _, sz := range [][2]int{{27, 500}, {500, 20}, {28, 6000}} {
		if _, err := q.Expand(sz[0], sz[1]); !errors.Is(err, ErrImageSize) {
			t.Errorf("qwen2-vl %dx%d: %v", sz[0], sz[1], err)
		}
	}
}
