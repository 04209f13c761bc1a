package media

import (
	"context"
	"fmt"
)

// Image is an image read and checked: its bytes, what its header says
// and its content id.
type Image struct {
	Data []byte
	Info Info
	ID   ID
}

// Resolver turns Sources into Images: it fetches URLs with Fetcher (nil:
// every URL is refused), then probes and identifies the bytes.
type Resolver struct {
	Fetcher *Fetcher
	// MaxBytes bounds inline images too (0: DefaultMaxBytes).
	MaxBytes int64
}

// Resolve reads one image. The declared media type (the request's, or
// the Content-Type a fetch returned when the request declared none) must
// be the type of the bytes; a fetched image's Content-Type that is not an
// image type is ignored, as servers often send octet-stream.
func (r *Resolver) Resolve(ctx context.Context, src Source) (Image, error) {
	limit := r.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	data, declared := src.Data, src.MediaType
	if src.URL != "" {
		if r.Fetcher == nil {
			return Image{}, fmt.Errorf("%w: image URLs are not fetched here (kvgate --media-allow-host allows hosts); send the image as base64", ErrHostNotAllowed)
		}
		body, contentType, err := r.Fetcher.Fetch(ctx, src.URL)
		if err != nil {
			return Image{}, err
		}
		data = body
		if declared == "" && FormatOf(contentType) != FormatUnknown {
			declared = contentType
		}
	}
	if int64(len(data)) > limit {
		return Image{}, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, len(data), limit)
	}
	info, err := Probe(data)
	if err != nil {
		return Image{}, err
	}
	if err := CheckType(declared, info); err != nil {
		return Image{}, err
	}
	return Image{Data: data, Info: info, ID: IDOf(data)}, nil
}
