package media

import (
	"errors"
	"testing"
)

func TestProbeSizes(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want Info
	}{
		{"png", testImage(t, PNG, 640, 480, 1), Info{PNG, 640, 480}},
		{"png tall", testImage(t, PNG, 3, 1000, 1), Info{PNG, 3, 1000}},
		{"jpeg", testImage(t, JPEG, 1024, 768, 1), Info{JPEG, 1024, 768}},
		{"jpeg odd", testImage(t, JPEG, 33, 17, 1), Info{JPEG, 33, 17}},
		{"gif", testImage(t, GIF, 300, 200, 1), Info{GIF, 300, 200}},
		{"webp lossless", webpVP8L(4000, 3000, 0), Info{WebP, 4000, 3000}},
		{"webp lossless max", webpVP8L(16384, 8192, 0), Info{WebP, 16384, 8192}},
		{"webp lossy", webpVP8(1920, 1080), Info{WebP, 1920, 1080}},
		{"webp extended", webpVP8X(100000, 3), Info{WebP, 100000, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Probe(c.data)
			if err != nil || got != c.want {
				t.Fatalf("Probe = %+v, %v; want %+v", got, err, c.want)
			}
			if err := CheckType(c.want.Format.MediaType(), got); err != nil {
				t.Fatalf("its own media type refused: %v", err)
			}
		})
	}
}

func TestProbeRefuses(t *testing.T) {
	png := testImage(t, PNG, 64, 64, 1)
	jpg := testImage(t, JPEG, 64, 64, 1)
	gif := testImage(t, GIF, 64, 64, 1)
	webp := webpVP8L(64, 64, 0)
	badIHDR := append([]byte{}, png...)
	badIHDR[11] = 14
	zero := append([]byte{}, png...)
	copy(zero[16:20], []byte{0, 0, 0, 0})
	longRIFF := append([]byte{}, webp...)
	longRIFF[4] += 100
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrUndecodable},
		{"text", []byte("hello, this is not an image at all"), ErrUndecodable},
		{"png cut", png[:len(png)-20], ErrUndecodable},
		{"png header only", png[:30], ErrUndecodable},
		{"png IHDR length", badIHDR, ErrSizeMismatch},
		{"png zero width", zero, ErrUndecodable},
		{"jpeg cut", jpg[:len(jpg)/2], ErrUndecodable},
		{"jpeg soi only", jpg[:4], ErrUndecodable},
		{"gif cut", gif[:len(gif)-1], ErrUndecodable},
		{"webp riff size", longRIFF, ErrSizeMismatch},
		{"webp cut", webp[:14], ErrSizeMismatch},
		{"webp over pixels", webpVP8X(20000, 20000), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if info, err := Probe(c.data); !errors.Is(err, c.want) {
				t.Fatalf("Probe = %+v, %v; want %v", info, err, c.want)
			}
		})
	}
}

func TestCheckType(t *testing.T) {
	info, err := Probe(testImage(t, JPEG, 40, 30, 1))
	if err != nil {
		t.Fatal(err)
	}
	for declared, ok := range map[string]bool{"": true, "image/jpeg": true, "image/jpg": true, "IMAGE/JPEG; q=1": true,
		"image/png": false, "image/webp": false, "image/bmp": false, "text/plain": false} {
		if err := CheckType(declared, info); (err == nil) != ok || (err != nil && !errors.Is(err, ErrMediaType)) {
			t.Errorf("CheckType(%q, JPEG) = %v, want ok=%v", declared, err, ok)
		}
	}
}
