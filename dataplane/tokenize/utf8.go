package tokenize

import (
	"unicode/utf8"
)

// toValidUTF8 returns s with every maximal invalid subsequence replaced by
// U+FFFD, the WHATWG / Unicode "maximal subpart" practice that Python's
// bytes.decode(errors="replace") and JavaScript's TextDecoder follow. Go's
// strings.ToValidUTF8 differs (one U+FFFD per run). Valid input is returned
// as is, without allocating.
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendValidUTF8(make([]byte, 0, len(s)+8), s))
}

// appendValidUTF8 appends s to dst as toValidUTF8 rewrites it.
func appendValidUTF8(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, s[i:i+n]...)
			i += n
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		i += maximalSubpart(s[i:])
	}
	return dst
}

// maximalSubpart returns how many bytes at the start of s form the longest
// prefix of a valid sequence (at least 1): they become one U+FFFD.
func maximalSubpart(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if b < lo || b > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}

// incompleteTail returns how many bytes at the end of b are the valid start
// of a UTF-8 sequence that more bytes could complete.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a lead byte k bytes from the end
			tail := string(b[len(b)-k:])
			if maximalSubpart(tail) == k && seqLen(c) > k {
				return k
			}
			return 0
		}
	}
	return 0
}

func seqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}

// asciiRun returns the end of the run of ASCII bytes from i, reading 8
// bytes at a time where it can: most text is ASCII, and a byte loop was
// the bulk of normalizing it.
func asciiRun(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	return i
}
