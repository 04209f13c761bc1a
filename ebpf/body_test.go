package ebpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// body is a response body in which every aligned 8-byte word holds its own
// offset (XORed with a value of the request id), so a lost, doubled or
// reordered byte shows, and bodyDiff can tell where a wrong byte came from.
func body(id, n int) []byte {
	b := make([]byte, n+8)
	salt := bodySalt(id)
	for o := 0; o < n; o += 8 {
		binary.LittleEndian.PutUint64(b[o:], uint64(o)^salt)
	}
	return b[:n:n]
}

func bodySalt(id int) uint64 { return uint64(id+1) * 0x9e3779b97f4a7c15 }

// bodyDiff returns "" when got is body(id, n), and otherwise where it
// first differs and what arrived there instead: the offset in the body
// those bytes belong to (a reorder or a loss shows as a jump) and where
// the expected bytes turn up later in got, if they do.
func bodyDiff(got []byte, id, n int) string {
	want := body(id, n)
	if bytes.Equal(got, want) {
		return ""
	}
	p := 0
	for p < len(got) && p < len(want) && got[p] == want[p] {
		p++
	}
	s := fmt.Sprintf("%d bytes, want %d; first difference at %d", len(got), n, p)
	salt := bodySalt(id)
	// The word holding the first wrong byte may start a little before it
	// (its first bytes can agree by chance) and need not be aligned in got.
	for q := max(0, p-7); q <= p+7 && q+8 <= len(got); q++ {
		if from := binary.LittleEndian.Uint64(got[q:]) ^ salt; from%8 == 0 && from < uint64(n) && from != uint64(q) {
			s += fmt.Sprintf("; the bytes at %d are the body's bytes at %d (%+d)", q, from, int64(from)-int64(q))
			break
		}
	}
	if w := want[p:min(p+64, len(want))]; len(w) > 0 {
		if i := bytes.Index(got[p:], w); i >= 0 {
			s += fmt.Sprintf("; the expected bytes arrive %d bytes later, at %d", i, p+i)
		} else {
			s += "; the expected bytes never arrive"
		}
	}
	return s
}
