package media

import "errors"

// Errors of this package; callers branch on them with errors.Is.
var (
	// ErrUndecodable: the bytes are not an image of a supported format,
	// or its header is broken or cut short.
	ErrUndecodable = errors.New("media: undecodable image")
	// ErrMediaType: the declared media type is not supported, or is not
	// the type of the bytes.
	ErrMediaType = errors.New("media: media type mismatch")
	// ErrSizeMismatch: a size the container declares disagrees with the
	// bytes (a chunk or file length past the end of the data).
	ErrSizeMismatch = errors.New("media: declared size does not match the data")
	// ErrTooLarge: more bytes or pixels than the limit.
	ErrTooLarge = errors.New("media: image too large")
	// ErrSource: a content part or block whose image source is malformed.
	ErrSource = errors.New("media: malformed image source")
	// ErrHostNotAllowed: a URL whose host the operator does not allow, or
	// any URL when fetching is off.
	ErrHostNotAllowed = errors.New("media: host not allowed")
	// ErrPrivateAddress: a host that resolves to a private, loopback,
	// link-local or multicast address.
	ErrPrivateAddress = errors.New("media: private address refused")
	// ErrFetch: a fetch that failed (status, timeout, redirect, network).
	ErrFetch = errors.New("media: fetch failed")
	// ErrNoProcessor: a processor name kvgate does not know.
	ErrNoProcessor = errors.New("media: no such image processor")
	// ErrPlacement: a prompt whose image markers are not one per image.
	ErrPlacement = errors.New("media: image markers do not match the images")
	// ErrImageSize: an image size the model's processor refuses.
	ErrImageSize = errors.New("media: image size refused by the processor")
)
