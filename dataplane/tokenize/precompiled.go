package tokenize

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// precompiled is SentencePiece's compiled normalizer (the Precompiled
// normalizer's precompiled_charsmap, as T5, XLM-R and other SentencePiece
// conversions carry it), read as Hugging Face's spm_precompiled crate
// reads it (src/lib.rs, 3795b14), which follows SentencePiece's own
// normalizer and its Darts-clone double array:
//
//	| trie size n (4 B, little endian) | n/4 units (4 B each, LE) | normalized strings, each NUL-terminated |
//
// A unit packs, from bit 0: label (bits 0-7, and bit 31: a label never
// matches a byte when set), has_leaf (bit 8), an offset (bits 10-30,
// shifted left by 8 more bits when bit 9 is set); a leaf unit's value
// (bits 0-30) is where its replacement starts among the normalized
// strings. Looking up a chunk walks the trie byte by byte from unit 0
// (pos ^= offset, then pos ^= byte, the unit there must carry the byte as
// its label); the first leaf met, the shortest prefix of the chunk that
// has a replacement, gives the replacement, as spm_precompiled's transform
// takes the first result of its common-prefix search.
//
// Text is normalized one extended grapheme cluster at a time
// (normalizers/precompiled.rs in tokenizers, 3ba8ad0): a cluster shorter
// than 6 bytes with a replacement is replaced whole, else each of its
// characters that has one. Clusters come from rivo/uniseg (Unicode 15.0);
// tokenizers' unicode-segmentation may be on a later Unicode version,
// which clusters a few Indic conjuncts differently (UAX #29 rule GB9c,
// Unicode 15.1); both agree elsewhere.
type precompiled struct {
	units      []uint32
	normalized string
	// ascii holds each ASCII character's replacement, found once; with
	// loneCluster most text skips the segmentation.
	ascii   [utf8.RuneSelf]string
	asciiOK [utf8.RuneSelf]bool
}

func newPrecompiled(charsmap *string) (*precompiled, error) {
	if charsmap == nil {
		return nil, unsupported("normalizer Precompiled without precompiled_charsmap")
	}
	raw, err := base64.StdEncoding.DecodeString(*charsmap)
	if err != nil {
		return nil, fmt.Errorf("%w: Precompiled charsmap: %v", ErrInvalid, err)
	}
	if len(raw) < 4 {
		return nil, fmt.Errorf("%w: Precompiled charsmap of %d bytes", ErrInvalid, len(raw))
	}
	n := int(binary.LittleEndian.Uint32(raw)) / 4
	if n == 0 || 4+4*n > len(raw) {
		return nil, fmt.Errorf("%w: Precompiled charsmap trie of %d units in %d bytes", ErrInvalid, n, len(raw))
	}
	p := &precompiled{units: make([]uint32, n), normalized: string(raw[4+4*n:])}
	for i := range p.units {
		p.units[i] = binary.LittleEndian.Uint32(raw[4+4*i:])
	}
	if !utf8.ValidString(p.normalized) {
		return nil, fmt.Errorf("%w: Precompiled charsmap strings are not UTF-8", ErrInvalid)
	}
	for c := range utf8.RuneSelf {
		p.ascii[c], p.asciiOK[c] = p.transform(string(rune(c)))
	}
	return p, nil
}

func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// transform returns the replacement of chunk, if any.
func (p *precompiled) transform(chunk string) (string, bool) {
	pos := unitOffset(p.units[0])
	for i := 0; i < len(chunk); i++ {
		c := chunk[i]
		if c == 0 {
			return "", false
		}
		pos ^= uint32(c)
		if int(pos) >= len(p.units) {
			return "", false
		}
		u := p.units[pos]
		if u&(1<<31|0xFF) != uint32(c) {
			return "", false
		}
		pos ^= unitOffset(u)
		if int(pos) >= len(p.units) {
			return "", false
		}
		if u>>8&1 == 1 {
			start := int(p.units[pos] & (1<<31 - 1))
			if start > len(p.normalized) {
				return "", false
			}
			end := start
			for end < len(p.normalized) && p.normalized[end] != 0 {
				end++
			}
			return p.normalized[start:end], true
		}
	}
	return "", false
}

func (p *precompiled) normalize(s string, a *textArena) string {
	var out []byte // nil until something changes
	state := -1
	for pos, rest := 0, s; rest != ""; {
		if n := loneCluster(rest); n > 0 {
			norm, ok := "", false
			if n == 1 {
				norm, ok = p.ascii[rest[0]], p.asciiOK[rest[0]]
			} else {
				norm, ok = p.transform(rest[:n])
			}
			if ok {
				out = p.begin(out, a, s, pos)
				out = append(out, norm...)
			} else if out != nil {
				out = append(out, rest[:n]...)
			}
			pos += n
			rest = rest[n:]
			state = -1 // nothing before a cluster boundary matters here
			continue
		}
		var g string
		g, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		start := pos
		pos += len(g)
		if len(g) < 6 {
			if norm, ok := p.transform(g); ok {
				out = p.begin(out, a, s, start)
				out = append(out, norm...)
				continue
			}
		}
		for i := 0; i < len(g); {
			_, n := utf8.DecodeRuneInString(g[i:])
			if norm, ok := p.transform(g[i : i+n]); ok {
				out = p.begin(out, a, s, start+i)
				out = append(out, norm...)
			} else if out != nil {
				out = append(out, g[i:i+n]...)
			}
			i += n
		}
	}
	if out == nil {
		return s
	}
	return a.keepNorm(out)
}

// loneCluster returns the length of the first character of s if it is a
// grapheme cluster by itself, known without segmenting: ASCII other than
// CR, or a CJK ideograph (stableLen's characters; neither is a Prepend),
// followed by the end or by another such character or a CR (neither
// Extend, ZWJ nor SpacingMark, so UAX #29 breaks before it). Else 0.
func loneCluster(s string) int {
	n := stableLen(s)
	if n == 0 || s[0] == '\r' {
		return 0
	}
	if n == len(s) || stableLen(s[n:]) > 0 {
		return n
	}
	return 0
}

// begin starts the output at the first change, with the text before it.
func (p *precompiled) begin(out []byte, a *textArena, s string, upTo int) []byte {
	if out != nil {
		return out
	}
	return append(a.normBuf(len(s)+16), s[:upTo]...)
}
