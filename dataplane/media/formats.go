package media

import (
	"bytes"
	"fmt"
)

var pngSignature = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'}

// pngEnd is the IEND chunk every PNG ends with: length 0, type, CRC.
var pngEnd = []byte{0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82}

// probePNG reads IHDR, the first chunk (PNG spec 11.2.2).
func probePNG(b []byte) (Info, error) {
	if len(b) < 8+8+13+4 {
		return Info{}, fmt.Errorf("%w: PNG cut short in its header", ErrUndecodable)
	}
	if string(b[12:16]) != "IHDR" {
		return Info{}, fmt.Errorf("%w: PNG does not start with IHDR", ErrUndecodable)
	}
	if n := be32(b[8:12]); n != 13 {
		return Info{}, fmt.Errorf("%w: PNG IHDR declares %d bytes, not 13", ErrSizeMismatch, n)
	}
	w, h := be32(b[16:20]), be32(b[20:24])
	if w > maxSide || h > maxSide {
		return Info{}, fmt.Errorf("%w: PNG header gives size %dx%d", ErrUndecodable, w, h)
	}
	if !bytes.HasSuffix(b, pngEnd) {
		return Info{}, fmt.Errorf("%w: PNG does not end with IEND (cut short?)", ErrUndecodable)
	}
	return Info{Format: PNG, Width: int(w), Height: int(h)}, nil
}

// probeGIF reads the logical screen descriptor (GIF89a spec 18), the
// size Pillow reports.
func probeGIF(b []byte) (Info, error) {
	if len(b) < 13 {
		return Info{}, fmt.Errorf("%w: GIF cut short in its header", ErrUndecodable)
	}
	if b[len(b)-1] != 0x3B {
		return Info{}, fmt.Errorf("%w: GIF does not end with its trailer (cut short?)", ErrUndecodable)
	}
	return Info{Format: GIF, Width: le16(b[6:8]), Height: le16(b[8:10])}, nil
}

// probeJPEG walks the marker segments to the first start-of-frame
// (ITU T.81 B.2), skipping each segment by its length, so the walk is
// bounded by the data; a scan before any frame header is refused.
func probeJPEG(b []byte) (Info, error) {
	i := 2
	for {
		for i < len(b) && b[i] == 0xFF && i+1 < len(b) && b[i+1] == 0xFF {
			i++ // fill bytes
		}
		if i+4 > len(b) {
			return Info{}, fmt.Errorf("%w: JPEG has no frame header", ErrUndecodable)
		}
		if b[i] != 0xFF {
			return Info{}, fmt.Errorf("%w: JPEG marker expected at byte %d", ErrUndecodable, i)
		}
		m := b[i+1]
		if m == 0x01 || (m >= 0xD0 && m <= 0xD7) {
			i += 2 // markers without a length
			continue
		}
		n := be16(b[i+2 : i+4])
		if n < 2 || i+2+n > len(b) {
			return Info{}, fmt.Errorf("%w: JPEG segment FF%02X declares %d bytes past the data", ErrSizeMismatch, m, n)
		}
		switch {
		case m == 0xDA, m == 0xD9:
			return Info{}, fmt.Errorf("%w: JPEG scan before any frame header", ErrUndecodable)
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			if n < 8 {
				return Info{}, fmt.Errorf("%w: JPEG frame header of %d bytes", ErrUndecodable, n)
			}
			h, w := be16(b[i+5:i+7]), be16(b[i+7:i+9])
			if bytes.LastIndex(b[i+2+n:], []byte{0xFF, 0xD9}) < 0 {
				return Info{}, fmt.Errorf("%w: JPEG has no end-of-image marker (cut short?)", ErrUndecodable)
			}
			return Info{Format: JPEG, Width: w, Height: h}, nil
		}
		i += 2 + n
	}
}

// probeWebP reads the first chunk of the RIFF container: a lossy VP8
// key frame (RFC 6386 9.1), a lossless VP8L header or the extended VP8X
// canvas (RFC 9649 2.5-2.7).
func probeWebP(b []byte) (Info, error) {
	if size := int64(le32(b[4:8])); size+8 > int64(len(b)) || size < 4 {
		return Info{}, fmt.Errorf("%w: WebP RIFF declares %d bytes, the data holds %d", ErrSizeMismatch, size, len(b)-8)
	}
	if len(b) < 30 {
		return Info{}, fmt.Errorf("%w: WebP cut short in its header", ErrUndecodable)
	}
	d := b[20:]
	if n := int64(le32(b[16:20])); n+20 > int64(len(b)) {
		return Info{}, fmt.Errorf("%w: WebP %q chunk declares %d bytes past the data", ErrSizeMismatch, b[12:16], n)
	}
	switch string(b[12:16]) { // no allocation: the conversion is only compared
	case "VP8 ":
		if d[0]&1 != 0 || d[3] != 0x9D || d[4] != 0x01 || d[5] != 0x2A {
			return Info{}, fmt.Errorf("%w: WebP VP8 data is not a key frame", ErrUndecodable)
		}
		return Info{Format: WebP, Width: le16(d[6:8]) & 0x3FFF, Height: le16(d[8:10]) & 0x3FFF}, nil
	case "VP8L":
		if d[0] != 0x2F {
			return Info{}, fmt.Errorf("%w: WebP VP8L signature missing", ErrUndecodable)
		}
		bits := le32(d[1:5])
		return Info{Format: WebP, Width: int(bits&0x3FFF) + 1, Height: int(bits>>14&0x3FFF) + 1}, nil
	case "VP8X":
		return Info{Format: WebP, Width: le24(d[4:7]) + 1, Height: le24(d[7:10]) + 1}, nil
	}
	return Info{}, fmt.Errorf("%w: WebP first chunk %q is not VP8, VP8L or VP8X", ErrUndecodable, b[12:16])
}
