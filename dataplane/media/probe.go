package media

import (
	"fmt"
	"strings"
)

// Format is an image format kvgate can read the size of.
type Format uint8

// The formats.
const (
	FormatUnknown Format = iota
	PNG
	JPEG
	WebP
	GIF
)

// String names the format as its media type does.
func (f Format) String() string {
	switch f {
	case PNG:
		return "PNG"
	case JPEG:
		return "JPEG"
	case WebP:
		return "WebP"
	case GIF:
		return "GIF"
	}
	return "unknown"
}

// MediaType is the format's IANA media type.
func (f Format) MediaType() string {
	switch f {
	case PNG:
		return "image/png"
	case JPEG:
		return "image/jpeg"
	case WebP:
		return "image/webp"
	case GIF:
		return "image/gif"
	}
	return ""
}

// SupportedTypes lists the media types accepted, for error messages.
const SupportedTypes = "image/png, image/jpeg, image/webp, image/gif"

// FormatOf maps a declared media type onto its format (parameters such
// as "; charset" ignored, image/jpg taken as image/jpeg); FormatUnknown
// when it is none of them.
func FormatOf(mediaType string) Format {
	t, _, _ := strings.Cut(mediaType, ";")
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "image/png":
		return PNG
	case "image/jpeg", "image/jpg":
		return JPEG
	case "image/webp":
		return WebP
	case "image/gif":
		return GIF
	}
	return FormatUnknown
}

// Info is what the header of an image says.
type Info struct {
	Format        Format
	Width, Height int
}

// MaxPixels is the largest image accepted, in pixels: Pillow's
// decompression-bomb limit (twice Image.MAX_IMAGE_PIXELS), past which the
// engine's loader (PIL, as vLLM's) refuses the image anyway.
const MaxPixels = 2 * 89478485

// maxSide bounds a side so width*height cannot overflow anywhere.
const maxSide = 1 << 20

// Probe reads the format, width and height from the header of b, checking
// what a header-only reader can: the signature, the header's own lengths
// against the data, the format's end marker (a file cut short is refused),
// a non-zero size and at most MaxPixels.
func Probe(b []byte) (Info, error) {
	var info Info
	var err error
	switch {
	case hasPrefix(b, pngSignature):
		info, err = probePNG(b)
	case len(b) >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF:
		info, err = probeJPEG(b)
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		info, err = probeWebP(b)
	case hasPrefix(b, []byte("GIF87a")) || hasPrefix(b, []byte("GIF89a")):
		info, err = probeGIF(b)
	default:
		return Info{}, fmt.Errorf("%w: not a PNG, JPEG, WebP or GIF image", ErrUndecodable)
	}
	if err != nil {
		return Info{}, err
	}
	if info.Width <= 0 || info.Height <= 0 || info.Width > maxSide || info.Height > maxSide {
		return Info{}, fmt.Errorf("%w: %s header gives size %dx%d", ErrUndecodable, info.Format, info.Width, info.Height)
	}
	if info.Width*info.Height > MaxPixels {
		return Info{}, fmt.Errorf("%w: %dx%d is over %d pixels", ErrTooLarge, info.Width, info.Height, MaxPixels)
	}
	return info, nil
}

// CheckType refuses a declared media type that is unsupported or is not
// the type of the bytes probed; an empty declaration checks nothing.
func CheckType(declared string, info Info) error {
	if declared == "" {
		return nil
	}
	f := FormatOf(declared)
	if f == FormatUnknown {
		return fmt.Errorf("%w: media type %q is not supported (%s)", ErrMediaType, declared, SupportedTypes)
	}
	if f != info.Format {
		return fmt.Errorf("%w: declared %s but the bytes are a %s image", ErrMediaType, declared, info.Format)
	}
	return nil
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

func be16(b []byte) int { return int(b[0])<<8 | int(b[1]) }
func le16(b []byte) int { return int(b[0]) | int(b[1])<<8 }
func le24(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }
func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
