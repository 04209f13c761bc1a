package media

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"
)

// testImage encodes a w x h image in format f with the standard library
// (WebP, which it cannot encode, is built by hand: the header is all
// Probe reads). seed varies the pixels, so two seeds are two images.
func testImage(t testing.TB, f Format, w, h int, seed byte) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i)*7 + seed
	}
	img.Set(0, 0, color.NRGBA{R: seed, A: 255})
	var b bytes.Buffer
	var err error
	switch f {
	case PNG:
		err = png.Encode(&b, img)
	case JPEG:
		err = jpeg.Encode(&b, img, nil)
	case GIF:
		err = gif.Encode(&b, img, nil)
	case WebP:
		return webpVP8L(w, h, seed)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// riff wraps one WebP chunk in its RIFF container, sizes filled in.
func riff(fourcc string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	_ = binary.Write(&b, binary.LittleEndian, uint32(4+8+len(payload)))
	b.WriteString("WEBP")
	b.WriteString(fourcc)
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(payload)))
	b.Write(payload)
	return b.Bytes()
}

// webpVP8L is a lossless WebP header: signature 0x2F, then width-1 and
// height-1 in 14 bits each, LSB first, then filler the size reader skips.
func webpVP8L(w, h int, seed byte) []byte {
	bits := uint32(w-1) | uint32(h-1)<<14
	p := []byte{0x2F, byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)}
	return riff("VP8L", append(p, seed, 1, 2, 3, 4, 5))
}

// webpVP8 is a lossy key frame header: frame tag (bit 0 clear: key
// frame), start code 9D 01 2A, 14-bit width and height with scale bits.
func webpVP8(w, h int) []byte {
	p := []byte{0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, byte(w), byte(w>>8) | 0x40, byte(h), byte(h>>8) | 0x80, 0, 0}
	return riff("VP8 ", p)
}

// webpVP8X is an extended header: flags, 3 reserved bytes, 24-bit
// canvas width-1 and height-1.
func webpVP8X(w, h int) []byte {
	w, h = w-1, h-1
	p := []byte{0x10, 0, 0, 0, byte(w), byte(w >> 8), byte(w >> 16), byte(h), byte(h >> 8), byte(h >> 16)}
	return riff("VP8X", p)
}
