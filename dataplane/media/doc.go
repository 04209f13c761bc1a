// Package media reads the images of multimodal prompts, as far as a
// router needs them: where the bytes are (a data URL, an Anthropic base64
// block, a URL fetched from a host the operator allows), what they are
// (PNG, JPEG, WebP or GIF, read from the header only: width and height,
// never a pixel), their content id, and how many placeholder tokens the
// model's processor makes of them.
//
// The content id is xxh3-128 of the decoded bytes, so the same image has
// the same id whichever transport carried it; it is the extra key of the
// blocks its placeholder tokens overlap (../../shared/DESIGN.md) and the
// id engines are given for it (vLLM's multi_modal_uuids).
//
// Headers are parsed by hand from a bounded prefix of the bytes, with a
// fuzz target per format that must never panic:
//
//	PNG:  | 89 'PNG' 0D 0A 1A 0A | len=13 (4B) | 'IHDR' | width (4B BE) | height (4B BE) | ...
//	GIF:  | 'GIF87a' or 'GIF89a' | width (2B LE) | height (2B LE) | ...
//	JPEG: | FF D8 | segments FF xx len (2B BE) ... | FF C0..CF (SOFn) len | precision | height (2B BE) | width (2B BE) |
//	WebP: | 'RIFF' | size (4B LE) | 'WEBP' | chunk:
//	        'VP8 ' size | frame tag (3B) | 9D 01 2A | width (14 bits LE) | height (14 bits LE)
//	        'VP8L' size | 2F | width-1 (14 bits) height-1 (14 bits), LE bit order
//	        'VP8X' size | flags (1B) | reserved (3B) | width-1 (3B LE) | height-1 (3B LE)
//
// URL fetching (Fetcher) is off by default and, when on, is no SSRF proxy:
// only the allowed hosts, http and https, no redirect to another host, a
// byte limit enforced while reading, a timeout, and no private, loopback,
// link-local or multicast address unless allowed, checked on the address
// actually dialed (so a name that re-resolves elsewhere gains nothing).
// Fetches run on the caller's goroutine, never on an event loop: the
// gateway serves each request on its own goroutine, and a Fetcher bounds
// how many fetches run at once.
package media
