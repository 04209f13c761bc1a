package media

import "testing"

// Probing is on every image's path: it reads headers only, so it must
// not allocate whatever the image's size.
func TestProbeAllocs(t *testing.T) {
	for _, f := range []Format{PNG, JPEG, GIF, WebP} {
		img := testImage(t, f, 256, 128, 1)
		if n := testing.AllocsPerRun(100, func() { _, _ = Probe(img) }); n != 0 {
			t.Errorf("Probe(%s) allocates %v times", f, n)
		}
	}
}

func BenchmarkProbe(b *testing.B) {
	for _, f := range []Format{PNG, JPEG} {
		img := testImage(b, f, 1024, 768, 1)
		b.Run(f.String(), func(b *testing.B) {
			b.ReportAllocs() // no SetBytes: a probe reads the header, not the image
			for b.Loop() {
				if _, err := Probe(img); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIDOf(b *testing.B) {
	img := make([]byte, 1<<20)
	for i := range img {
		img[i] = byte(i * 31)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		_ = IDOf(img)
	}
}

// BenchmarkPlace: a 600-token prompt with two Qwen2.5-VL images
// (1024x768: 999 placeholder tokens, 640x480: 391) expanded in place.
func BenchmarkPlace(b *testing.B) {
	qwen, _ := NewProcessor("qwen2.5-vl", ProcessorOptions{})
	big, _ := qwen.Expand(1024, 768)
	small, _ := qwen.Expand(640, 480)
	exps := []Expansion{big, small}
	v := testVocab{"<|image_pad|>": 1001}
	ids := make([]uint32, 600)
	for i := range ids {
		ids[i] = uint32(i % 900)
	}
	ids[100], ids[400] = 1001, 1001
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Place(ids, 1001, exps, v); err != nil {
			b.Fatal(err)
		}
	}
}
